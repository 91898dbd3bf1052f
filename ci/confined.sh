#!/usr/bin/env bash
# Confined mode as a fork's pull request gets it (the action's `confined: auto`; docs/src/design/node-privileges.md):
# 1. a scenario with a container node, scenarios/node-privileges.yaml (the fresh procfs/sysfs probe on a container
#    machine), is refused when it loads (exit 104, the list cannot be made), saying why;
# 2. the same probe on a VM machine, scenarios/vm-al2023.yaml, passes in confined mode: it writes
#    kernel.core_pattern and transparent huge pages through its own fresh procfs and sysfs, and its check
#    `host kernel untouched` finds the host's as they were; this script compares them too. Its QEMU runs under
#    QEMU's seccomp filter and as user nobody where this host allows (`nodejoin doctor` says which).
#
# Usage: ci/confined.sh   (from anywhere)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
nodejoin() { cargo run -q --bin nodejoin -- "$@"; }
say() { echo "confined: $*"; }

set +e
refused=$(nodejoin run --confined scenarios/node-privileges.yaml 2>&1)
rc=$?
set -e
if [ "$rc" -ne 104 ] || ! grep -q "confined mode takes only machines that cannot reach this host's kernel" <<<"$refused"; then
  say "a container node was not refused in confined mode (exit $rc):"
  echo "$refused"
  exit 1
fi
say "the container node was refused when its scenario loaded: $(grep -m1 'confined mode' <<<"$refused")"

params() { cat /proc/sys/kernel/core_pattern /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; }
before=$(params)
nodejoin doctor 2>&1 | grep "VM machines' confinement" || true
nodejoin run --confined scenarios/vm-al2023.yaml
after=$(params)
if [ "$before" != "$after" ]; then
  say "the host's kernel parameters changed during the confined run: before '$before', after '$after'"
  exit 1
fi
say "the VM node's probe passed in confined mode; the host's kernel parameters are as they were"
