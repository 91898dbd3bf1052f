#!/usr/bin/env bash
# Renders the book (docs/) with a pinned mdBook, installed from crates.io outside the repository when missing
# (like cargo-nextest in ci/nextest-skips.sh), into $CARGO_TARGET_DIR/book (default target/book). mdBook fails on
# a SUMMARY.md entry without its page; the links between pages are checked by `cargo test --test book`.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
tools=${NODEJOIN_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nodejoin-tools}/mdbook-$MDBOOK_VERSION
mdbook=$tools/bin/mdbook
if [ "$("$mdbook" --version 2>/dev/null | awk '{print $2}')" != "v$MDBOOK_VERSION" ]; then
  echo "book: installing mdbook $MDBOOK_VERSION into $tools (outside the repo)"
  t0=$(date +%s)
  # A debug build, as cargo-nextest's in ci/nextest-skips.sh: it renders a few dozen pages, and a cold CI run pays
  # for its compile.
  env -u CARGO_TARGET_DIR nice cargo install mdbook --version "$MDBOOK_VERSION" --locked --no-default-features --debug \
    --root "$tools" --quiet
  echo "book: mdbook installed in $(( $(date +%s) - t0 ))s"
fi
out=${CARGO_TARGET_DIR:-target}/book
"$mdbook" build docs --dest-dir "$(realpath -m "$out")"
echo "book: rendered $(find "$out" -name '*.html' | wc -l) pages into $out"
