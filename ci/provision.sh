#!/usr/bin/env bash
# Provisions what the scenarios need, cached outside the repository ($XDG_CACHE_HOME/nodejoin or
# ~/.cache/nodejoin): Kubernetes binaries (download, else Go-module build) and the node image (debootstrap).
# Usage: ci/provision.sh [KUBERNETES_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-${NODEJOIN_K8S_VERSION:-}}
cargo build --quiet --bin nodejoin
bin=target/debug/nodejoin
if [ -n "$version" ]; then set -- --version "$version"; else set --; fi
"$bin" assets "$@"
"$bin" image build "$@"
"$bin" doctor "$@"
