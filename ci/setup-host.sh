#!/usr/bin/env bash
# Prepares a Debian/Ubuntu host (CI runner or laptop) for nodejoin: packages, and a running Docker engine.
# Idempotent: installs only what is missing, starts dockerd only when no engine answers.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v gcc >/dev/null || missing+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/aarch64-linux-gnu/libc.a ] || missing+=(libc6-dev)
[ -f /usr/include/seccomp.h ] || missing+=(libseccomp-dev)
command -v iptables >/dev/null || missing+=(iptables)
command -v tar >/dev/null || missing+=(tar)
command -v curl >/dev/null || missing+=(curl)
command -v jq >/dev/null || missing+=(jq)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ ${#missing[@]} -gt 0 ]; then
  echo "ci/setup-host.sh: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "ci/setup-host.sh: starting dockerd"
  setsid nohup dockerd >/var/log/nodejoin-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/nodejoin-dockerd.log" >&2; tail -20 /var/log/nodejoin-dockerd.log >&2; exit 1; }
fi
echo "ci/setup-host.sh: Docker $(docker version --format '{{.Server.Version}}') ready"

# Every node container runs systemd, containerd and a kubelet, each holding inotify instances (the kubelet's
# cAdvisor fails with "inotify_init: too many open files" when they run out). The kernel's default of 128
# instances per user holds about a dozen nodes; raise it (never lower it) so larger scenarios and concurrent
# runs fit.
raise() {
  local key=$1 want=$2 have
  have=$(sysctl -n "$key" 2>/dev/null || echo 0)
  if [ "$have" -lt "$want" ]; then
    sysctl -qw "$key=$want" && echo "ci/setup-host.sh: $key $have -> $want" \
      || echo "ci/setup-host.sh: warning: cannot raise $key ($have); large scenarios may run out of inotify instances" >&2
  fi
}
raise fs.inotify.max_user_instances 8192
raise fs.inotify.max_user_watches 524288
