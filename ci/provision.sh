#!/usr/bin/env bash
# Provisions what the scenarios need, cached outside the repository ($XDG_CACHE_HOME/nodejoin or
# ~/.cache/nodejoin): Kubernetes binaries (download, else Go-module build), the node image (debootstrap) and the
# kind provider's node image (built from Go modules: no registry needed), for the default Kubernetes version and
# for each version a bundled scenario that runs on kind pins (`kubernetesVersion:`; one pinned for the local
# provider alone needs none). jq reads the scenario list (ci/setup-host.sh installs it).
# Usage: ci/provision.sh [KUBERNETES_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-${NODEJOIN_K8S_VERSION:-}}
cargo build --quiet --bin nodejoin
bin="${CARGO_TARGET_DIR:-target}/debug/nodejoin"
if [ -n "$version" ]; then set -- --version "$version"; else set --; fi
"$bin" assets "$@"
"$bin" image build "$@"
if [ "${NODEJOIN_SKIP_KIND_IMAGE:-}" != 1 ]; then
  "$bin" image build --kind "$@"
  for pinned in $("$bin" list scenarios/ --format json \
    | jq -r '.[] | select(.provider == "kind" and .ignored == null) | .kubernetesVersion' | sort -u); do
    "$bin" image build --kind --version "$pinned"
  done
fi
"$bin" doctor "$@"
