#!/usr/bin/env bash
# Release archives, as the release workflow (.github/workflows/release.yml) publishes them and the action and
# cargo-binstall fetch them: nodejoin-v<version>-<target>.tar.gz holding nodejoin-v<version>-<target>/{nodejoin,
# LICENSE,README.md}, deterministic (sorted, no times or owners), and beside it <archive>.sha256 in sha256sum's
# format. docs/src/reference/releases.md.
#
#   ci/release.sh build TARGET      cargo zigbuild --release for TARGET against glibc 2.28, then pack (the workflow)
#   ci/release.sh pack BINARY TARGET OUTDIR   pack a built binary (the workflow; tests/user_repo.rs with its own)
#   ci/release.sh version           the version harness/Cargo.toml declares
#   ci/release.sh pinned ARCHIVE    the SHA-256 ci/releases.sha256 pins for ARCHIVE (exit 1 when none is)
set -euo pipefail
cd "$(dirname "$0")/.."

# NODEJOIN_RELEASE_VERSION names a pack otherwise (tests/user_repo.rs serves this build as the next release).
version() { echo "${NODEJOIN_RELEASE_VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' harness/Cargo.toml | head -n1)}"; }

pack() {
  local binary=$1 target=$2 out=$3 v name stage
  v=$(version)
  case "$target" in
    *[!a-z0-9_.-]* | "") echo "release: not a target triple: '$target'" >&2; exit 2 ;;
  esac
  name="nodejoin-v$v-$target"
  mkdir -p "$out"
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir "$stage/$name"
  install -m 0755 "$binary" "$stage/$name/nodejoin"
  install -m 0644 LICENSE README.md "$stage/$name/"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - "$name" | gzip -n -9 \
    >"$out/$name.tar.gz"
  (cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
  echo "release: $out/$name.tar.gz ($(cut -d' ' -f1 "$out/$name.tar.gz.sha256"))"
}

# The hash pinned for an archive's name: exactly one well-formed line names it, or none is pinned.
pinned() {
  local name=$1 found
  case "$name" in
    *[!A-Za-z0-9_.-]* | "") echo "release: not an archive name: '$name'" >&2; exit 2 ;;
  esac
  found=$(awk -v f="$name" '$2 == f && $1 ~ /^[0-9a-f]+$/ && length($1) == 64 && NF == 2 { print $1 }' \
    ci/releases.sha256)
  if [ -z "$found" ] || [ "$(printf '%s\n' "$found" | wc -l)" -ne 1 ]; then
    return 1
  fi
  echo "$found"
}

case "${1:-}" in
  version) version ;;
  pinned)
    [ $# -eq 2 ] || { echo "usage: ci/release.sh pinned ARCHIVE" >&2; exit 2; }
    pinned "$2"
    ;;
  pack)
    [ $# -eq 4 ] || { echo "usage: ci/release.sh pack BINARY TARGET OUTDIR" >&2; exit 2; }
    pack "$2" "$3" "$4"
    ;;
  build)
    [ $# -eq 2 ] || { echo "usage: ci/release.sh build TARGET" >&2; exit 2; }
    target=$2
    unset NODEJOIN_RELEASE_VERSION
    v=$(version)
    # A release is a version without a pre-release part; main between releases says X.Y.Z-dev, and the action
    # builds such a checkout from source instead of looking for a release.
    case "$v" in
      *-*) echo "release: harness/Cargo.toml says $v, a pre-release: set the release's version first" >&2; exit 1 ;;
    esac
    if [ -n "${GITHUB_REF_NAME:-}" ] && [ "$GITHUB_REF_NAME" != "v$v" ]; then
      echo "release: tag $GITHUB_REF_NAME does not match harness/Cargo.toml's version $v" >&2
      exit 1
    fi
    # glibc 2.28 and later (Debian 10, Ubuntu 20.04, RHEL 8, AL2023) through zig's linker: one binary for every
    # runner and laptop that runs Docker.
    # The commit built from, embedded so the binary's `nodejoin init` pins the action by commit (harness/build.rs).
    NODEJOIN_RELEASE_COMMIT=${GITHUB_SHA:-} cargo zigbuild --locked --release --bin nodejoin --target "$target.2.28"
    pack "${CARGO_TARGET_DIR:-target}/$target/release/nodejoin" "$target" dist
    ;;
  *) echo "usage: ci/release.sh build TARGET | pack BINARY TARGET OUTDIR | version | pinned ARCHIVE" >&2; exit 2 ;;
esac
