#!/usr/bin/env bash
# The crate as crates.io would get it: `cargo package -p nodejoin` packs it and builds the packed copy alone (no
# workspace around it), and that build's binary, run from a directory with no checkout above it, must find the
# fixtures and kind config it embeds (build.rs packs them from share/, which the package carries).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
# The packed crate has no workspace, so none of the workspace's profile: the same settings, read from the workspace's
# Cargo.toml (so the two cannot drift apart) and given on the command line, let its build reuse the dependencies
# README's commands compiled (else every one is compiled again: 9 minutes on 2 cores).
setting() { # SECTION KEY: the value of KEY in Cargo.toml's [SECTION], as TOML writes it
  awk -v s="[$1]" -v k="$2" '$0 == s {on = 1; next} /^\[/ {on = 0}
    on && $1 == k && $2 == "=" {sub(/^[^=]*= */, ""); sub(/ *#.*$/, ""); print; exit}' Cargo.toml
}
profile=()
for pair in 'profile.dev.package."*" opt-level' 'profile.dev.package."*" debug' 'profile.dev debug'; do
  section=${pair% *} key=${pair##* }
  value=$(setting "$section" "$key")
  [ -n "$value" ] || { echo "package: Cargo.toml has no $key under [$section]" >&2; exit 1; }
  profile+=(--config "$section.$key=$value")
done
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
