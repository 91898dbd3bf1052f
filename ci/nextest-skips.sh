#!/usr/bin/env bash
# Proof that skips are skips under cargo-nextest, where every trial is its own process and a trial ignored only
# at run time would exit 0 and read as PASS: a provider that cannot run shows as SKIP (decided when the trials
# are listed), never as PASS, and as FAIL when NODEJOIN_REQUIRE_PROVIDERS requires it. Run by .ci/run after the
# README's test command; needs Docker and the provisioned node image (one local trial runs, ~15 s). Then the
# partitions of `nodejoin list` against nextest's own split of the same names.
# The k3s and kind images are pointed at names no registry has, so the proof holds on any machine.
set -euo pipefail
cd "$(dirname "$0")/.."

NEXTEST_VERSION=0.9.128
installed=$(cargo nextest --version 2>/dev/null | head -n1 | awk '{print $2}' || true)
if [ "$installed" != "$NEXTEST_VERSION" ]; then
  echo "nextest-skips: installing cargo-nextest $NEXTEST_VERSION into ${CARGO_HOME:-$HOME/.cargo} (outside the repo)"
  # A debug build: it runs a handful of trials here, and compiles in 130 s against 284 s for a release build on 2
  # cores (a cold CI run pays for it).
  env -u CARGO_TARGET_DIR cargo install cargo-nextest --version "$NEXTEST_VERSION" --locked --debug \
    --no-default-features --features default-no-update
fi
# `--install-only`: .ci/run installs it beside its emulated steps, where a cold host's compile costs no time.
[ "${1:-}" = --install-only ] && exit 0

export NODEJOIN_K3S_IMAGE=nodejoin.invalid/k3s:never NODEJOIN_KIND_IMAGE=nodejoin.invalid/kind-node:never
unset NODEJOIN_PROVIDERS NODEJOIN_REQUIRE_PROVIDERS NODEJOIN_SKIP_TRIALS
filter='test(/\/basic-bootstrap-token$/)'
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "nextest-skips: FAILED: $1" >&2
  [ -n "${2:-}" ] && cat "$2" >&2
  exit 1
}
trial() { echo " $1/v1\.[0-9]+/basic-bootstrap-token\$"; }

# 1. nextest lists the k3s and kind trials as ignored (not merely filtered out), the local one as not ignored.
cargo nextest list --color never --test scenarios --run-ignored only -E "$filter" >"$out/ignored" 2>&1 ||
  fail "cargo nextest list" "$out/ignored"
for p in k3s kind; do
  grep -Eq "$(trial "$p")" "$out/ignored" || fail "$p is not listed as ignored" "$out/ignored"
done
grep -Eq "$(trial local)" "$out/ignored" && fail "local is listed as ignored" "$out/ignored"
# ... and, under NODEJOIN_SKIP_TRIALS=local/ (what .ci/run gives README's second command), the local one too.
NODEJOIN_SKIP_TRIALS=local/ cargo nextest list --color never --test scenarios --run-ignored only -E "$filter" \
  >"$out/skipped" 2>&1 || fail "cargo nextest list (NODEJOIN_SKIP_TRIALS)" "$out/skipped"
grep -Eq "$(trial local)" "$out/skipped" || fail "NODEJOIN_SKIP_TRIALS=local/ did not list local as ignored" "$out/skipped"

# 2. A run: local PASS; k3s and kind SKIP; nothing of k3s or kind PASS.
cargo nextest run --color never --test scenarios -E "$filter" --status-level all --final-status-level none \
  >"$out/run" 2>&1 || fail "cargo nextest run" "$out/run"
grep -E "basic-bootstrap-token$|Summary" "$out/run" | sed 's/^/nextest-skips: /'
grep -Eq "^ *PASS .*$(trial local)" "$out/run" || fail "local did not PASS" "$out/run"
for p in k3s kind; do
  grep -Eq "^ *SKIP .*$(trial "$p")" "$out/run" || fail "$p is not a SKIP" "$out/run"
done
grep -Eq "^ *PASS .* (k3s|kind)/v1" "$out/run" && fail "an unavailable provider reads as PASS" "$out/run"

# 3. Required, the same k3s trial is a FAIL that says why, and the run fails.
if NODEJOIN_REQUIRE_PROVIDERS=k3s cargo nextest run --color never --test scenarios \
  -E 'test(/k3s\/v1\.[0-9]+\/basic-bootstrap-token$/)' --status-level all --final-status-level none \
  >"$out/required" 2>&1; then
  fail "a required provider that cannot run passed" "$out/required"
fi
grep -E "basic-bootstrap-token$|Summary" "$out/required" | sed 's/^/nextest-skips (required): /'
grep -Eq "^ *FAIL .*$(trial k3s)" "$out/required" || fail "required k3s is not a FAIL" "$out/required"
grep -q "required" "$out/required" || fail "the failure does not say the provider was required" "$out/required"

# 4. `nodejoin run --partition` shards as nextest shards the same trial names: the bundled scenarios and a user's
# folder (NODEJOIN_SCENARIOS points the trials at it), both kinds, ignored trials dealt apart as nextest deals them.
nodejoin=${CARGO_TARGET_DIR:-target}/debug/nodejoin
cargo build --quiet --bin nodejoin
# A case is a folder and the Kubernetes versions its trials are made for (empty: the default one).
for case in scenarios: harness/tests/from_repo/nodejoin/scenarios: \
  harness/tests/from_repo/nodejoin/scenarios:v1.35.4,v1.36.3; do
  folder=${case%%:*} versions=${case#*:}
  for shard in count:1/2 count:2/2 hash:1/3 hash:2/3 hash:3/3; do
    NODEJOIN_K8S_VERSION=$versions NODEJOIN_SCENARIOS=$PWD/$folder NODEJOIN_PROVIDERS=local \
      cargo nextest list --test scenarios --partition "$shard" --run-ignored all --message-format json \
      2>"$out/nextest-err" |
      jq -r '.["rust-suites"][].testcases | to_entries[] | select(.value["filter-match"].status == "matches") | .key' |
      sort >"$out/nextest" || fail "cargo nextest list --partition $shard" "$out/nextest-err"
    NODEJOIN_K8S_VERSION=$versions "$nodejoin" list "$folder" --partition "$shard" --format json 2>/dev/null |
      jq -r '.[].name' | sort >"$out/ours"
    [ -s "$out/ours" ] || [ -s "$out/nextest" ] || continue
    diff "$out/nextest" "$out/ours" >"$out/diff" ||
      fail "$folder ${versions:-default version} $shard: nodejoin's shard differs from nextest's" "$out/diff"
    echo "nextest-skips: $folder ${versions:-default version} $shard: the same $(wc -l <"$out/ours") trial(s) as nextest"
  done
done
echo "nextest-skips: ok (unavailable providers SKIP, never PASS; required, they FAIL; shards are nextest's)"
