#!/usr/bin/env bash
# The crate as crates.io would get it: `cargo package -p nodejoin` packs it and builds the packed copy alone (no
# workspace around it), and that build's binary, run from a directory with no checkout above it, must find the
# fixtures and kind config it embeds (build.rs packs them from share/, which the package carries).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
# The packed crate has no workspace, so none of the workspace's profile: the same settings given here let its build
# reuse the dependencies README's commands compiled (else every one is compiled again: 9 minutes on 2 cores). The
# dependencies' opt-level is read from the workspace's Cargo.toml, so the two cannot drift apart.
opt=$(sed -n '/^\[profile\.dev\.package\."\*"\]/,/^\[/ s/^opt-level *= *\([0-9sz"]*\).*/\1/p' Cargo.toml)
[ -n "$opt" ] || { echo "package: no opt-level under [profile.dev.package.\"*\"] in Cargo.toml" >&2; exit 1; }
profile=(--config "profile.dev.package.\"*\".opt-level=$opt" --config 'profile.dev.package."*".debug=false'
  --config 'profile.dev.debug="line-tables-only"')
cargo package "${profile[@]}" -p nodejoin --locked
version=$(bash ci/release.sh version)
packed="$target/package/nodejoin-$version"
[ -f "$packed/share/fixtures/bootstrap/bootstrap.sh" ] || { echo "package: no fixtures in $packed" >&2; exit 1; }
# The packed copy's own binary (the verification build above made it; this only links it under its name).
cargo build "${profile[@]}" --manifest-path "$packed/Cargo.toml" --locked --bin nodejoin --quiet
away=$(mktemp -d)
trap 'rm -rf "$away"' EXIT
out=$(cd "$away" && "$target/debug/nodejoin" doctor 2>&1) || true
line=$(grep -m1 "nodejoin's own files" <<<"$out" || true)
echo "package: the packaged binary's doctor says: $line"
case "$line" in
  "ok  "*"built into this binary"*) ;;
  *) echo "package: the packaged binary did not find its embedded files:" >&2; echo "$out" >&2; exit 1 ;;
esac
