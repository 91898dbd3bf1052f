#!/usr/bin/env bash
# Runs scenarios on a cgroup v2 host: a small Debian VM (stock linux-image-amd64 kernel, debootstrap root, Docker)
# booted with QEMU on the unified hierarchy only. Use it from a cgroup v1 machine, or anywhere, to see nodejoin
# where CI runners and AL2023 nodes live.
#
# Usage: ci/cgroup2-vm.sh SCENARIO_FILE...
#
# What it does, each step time-bounded and shown:
#  1. installs what is missing (qemu-system-x86, debootstrap, cpio, e2fsprogs) from Debian packages;
#  2. builds the guest root once (cached under the nodejoin cache, keyed by ci/cgroup2-vm/packages.txt and the
#     kernel version; rebuilt when they change) and its initramfs (keyed by ci/cgroup2-vm/initramfs-init);
#  3. builds or finds, on this host, every node image the scenarios use (`nodejoin image prepare`) and saves them;
#  4. boots the guest (KVM when /dev/kvm boots a stock kernel, else QEMU's software emulation, TCG: the log says
#     which), with the repository, the asset cache and the scenarios' folders shared read-only at their host
#     paths; the guest reaches no network;
#  5. in the guest: `stat -fc %T /sys/fs/cgroup` (must be cgroup2fs), Docker, the saved images, `nodejoin run`;
#  6. copies the run's reports and JUnit to $NODEJOIN_ARTIFACTS_DIR/cgroup2-vm/<time>/ and exits with the run's
#     exit code (the codes of `nodejoin run`; 1 also when the guest itself failed).
# Nothing is left running or mounted when it ends, Ctrl-C included (the VM is killed, its work folder removed).
#
# Environment: NODEJOIN_VM_ACCEL (auto, kvm or tcg), NODEJOIN_VM_MEMORY (MiB, default 6144),
# NODEJOIN_VM_TIMEOUT (seconds for the whole guest, default 2400), NODEJOIN_VM_RUN_TIMEOUT (seconds for
# `nodejoin run` in it, default 1800), NODEJOIN_VM_JOBS (scenarios at a time in the guest, default 1), NODEJOIN_BIN (a built nodejoin; default: cargo
# build), NODEJOIN_VM_ENV (variables for nodejoin in the guest, e.g. "NODEJOIN_EKS_AMI=/path").
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
vmdir=$here/cgroup2-vm
[ $# -gt 0 ] || { echo "usage: ci/cgroup2-vm.sh SCENARIO_FILE..." >&2; exit 2; }
t0=$(date +%s)
step() { echo "cgroup2-vm: [$(( $(date +%s) - t0 ))s] $*"; }
die() { echo "cgroup2-vm: error: $1" >&2; exit "${2:-2}"; }

scenarios=()
for f in "$@"; do
  [ -f "$f" ] || die "$f is not a scenario file"
  scenarios+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
done

cache=${NODEJOIN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nodejoin}
vmcache=$cache/cgroup2-vm
mkdir -p "$vmcache"

# 1. Host packages.
missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v cpio >/dev/null || missing+=(cpio)
command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
command -v depmod >/dev/null || missing+=(kmod)
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]}"
  timeout 600 apt-get update -qq
  timeout 900 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The guest root and its initramfs, built once under a lock (another run building the same root waits).
kernel_of() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
kernel_pkg=$(kernel_of)
if [ -z "$kernel_pkg" ]; then
  timeout 600 apt-get update -qq || true
  kernel_pkg=$(kernel_of)
fi
[ -n "$kernel_pkg" ] || die "apt knows no linux-image-amd64 (is this Debian or Ubuntu with its package lists?)"
root_key=$( (cat "$vmdir/packages.txt"; echo "$kernel_pkg") | sha256sum | cut -c1-12)
root=$vmcache/root-$root_key
exec 9>"$vmcache/build.lock"
timeout 1200 flock 9 || die "another run held $vmcache/build.lock for 20 minutes"
if [ ! -e "$root/.complete" ]; then
  step "building the guest root $root (debootstrap bookworm, $kernel_pkg)"
  rm -rf "$root.partial"
  mkdir -p "$root.partial"
  pkgs=$(grep -v '^#' "$vmdir/packages.txt" | grep -v '^[[:space:]]*$' | paste -sd, -)
  timeout 1200 debootstrap --variant=minbase --include="$pkgs" bookworm "$root.partial" \
    "${NODEJOIN_DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$vmcache/debootstrap.log" 2>&1 \
    || { tail -20 "$vmcache/debootstrap.log" >&2; die "debootstrap failed (log: $vmcache/debootstrap.log)" 1; }
  # Unpacked beside the root, then copied in: bookworm's /lib is a symlink to usr/lib that tar would replace.
  kdir=$(mktemp -d "$vmcache/kernel.XXXXXX")
  (cd "$kdir" && timeout 600 apt-get download -q "$kernel_pkg" >/dev/null 2>&1 \
    && dpkg-deb -x "$kernel_pkg"_*.deb unpacked) || { rm -rf "$kdir"; die "could not fetch $kernel_pkg" 1; }
  cp -a "$kdir/unpacked/boot/." "$root.partial/boot/"
  cp -a "$kdir/unpacked/lib/." "$root.partial/usr/lib/"
  rm -rf "$kdir"
  kver=${kernel_pkg#linux-image-}
  depmod -b "$root.partial" "$kver"
  ln -sfn "boot/vmlinuz-$kver" "$root.partial/vmlinuz"
  rm -rf "$root.partial/var/cache/apt/archives/"*.deb "$root.partial/var/lib/apt/lists/"*
  touch "$root.partial/.complete"
  rm -rf "$root"
  mv "$root.partial" "$root"
  step "guest root ready ($(du -sh "$root" | cut -f1))"
fi
touch "$root"
# Roots and initramfs images of other inputs are kept three days after their last use.
find "$vmcache" -mindepth 1 -maxdepth 1 \( -name 'root-*' -o -name 'initramfs-*' \) ! -newermt '3 days ago' \
  -exec rm -rf {} + 2>/dev/null || true
kver=$(readlink "$root/vmlinuz"); kver=${kver#boot/vmlinuz-}
initrd_modules="virtio_pci 9pnet_virtio 9p overlay"
initrd_key=$(cat "$vmdir/initramfs-init" <(echo "$kver $initrd_modules") | sha256sum | cut -c1-12)
initrd=$vmcache/initramfs-$root_key-$initrd_key.cpio
[ ! -e "$initrd" ] || touch "$initrd"
if [ ! -e "$initrd" ]; then
  step "building the initramfs"
  ir=$(mktemp -d "$vmcache/initramfs.XXXXXX")
  mkdir -p "$ir/bin" "$ir/proc" "$ir/sys" "$ir/dev"
  cp "$root/bin/busybox" "$ir/bin/busybox"
  cp "$vmdir/initramfs-init" "$ir/init"
  : > "$ir/modules.order"
  # The modules that reach the root (virtio, 9p, overlay), in load order, with their dependencies.
  modprobe -S "$kver" -d "$root" --show-depends -a $initrd_modules \
    | awk '$1 == "insmod" {print $2}' | while read -r m; do
      rel=${m#"$root"}
      grep -qx "$rel" "$ir/modules.order" && continue
      mkdir -p "$ir$(dirname "$rel")"
      cp "$m" "$ir$rel"
      echo "$rel" >> "$ir/modules.order"
    done
  (cd "$ir" && find . | cpio -o -H newc --quiet > "$initrd.partial") && mv "$initrd.partial" "$initrd"
  rm -rf "$ir"
fi
flock -u 9

# 3. The node images, built here (the guest has no network), laid into the guest's Docker disk here too: a
# `docker load` inside the emulated guest takes minutes per GiB; a throwaway engine on this host (no network,
# no iptables, its own sockets and folders) takes seconds, and `mkfs.ext4 -d` copies its data-root into an ext4
# image (overlay2 cannot stack on 9p). The disk is cached by the images' IDs and the guest writes to a
# snapshot of it, so runs sharing it never see each other's writes.
nodejoin=${NODEJOIN_BIN:-}
if [ -z "$nodejoin" ]; then
  step "building nodejoin"
  (cd "$repo" && timeout 1800 cargo build -q --bin nodejoin)
  nodejoin=${CARGO_TARGET_DIR:-$repo/target}/debug/nodejoin
fi
[ -x "$nodejoin" ] || die "no nodejoin binary at $nodejoin"
# Work directories of runs killed outright (SIGKILL: no trap ran) go once their owner (PID and start time) is gone.
for old in "$vmcache"/run.*; do
  [ -f "$old/owner" ] || continue
  read -r old_pid old_start < "$old/owner" || continue
  [ "$(awk '{print $22}' "/proc/$old_pid/stat" 2>/dev/null)" = "$old_start" ] || rm -rf "$old"
done
work=$(mktemp -d "$vmcache/run.XXXXXX")
echo "$$ $(awk '{print $22}' /proc/$$/stat)" > "$work/owner"
# What the guest sees and may write (its 9p share) is $shared alone; the console QEMU writes on the host stays
# beside it, out of the guest's reach, so no link the guest plants there is followed by what reads it here.
shared=$work/guest
mkdir -p "$shared"
qemu_pid=
loader=
stop_loader() {
  [ -n "$loader" ] && [ -s "$loader/pid" ] || return 0
  local pid
  pid=$(cat "$loader/pid")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
  # Its own containerd, found by the folder only it uses.
  pkill -KILL -f -- "$loader/exec" 2>/dev/null || true
  rm -f "$loader/pid"
}
cleanup() {
  local rc=$?
  if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
    kill -KILL "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
  stop_loader
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "cgroup2-vm: interrupted" >&2; exit 130' INT
trap 'echo "cgroup2-vm: terminated" >&2; exit 143' TERM
step "node images the scenarios use (nodejoin image prepare)"
# shellcheck disable=SC2086
tags=$(cd "$repo" && env ${NODEJOIN_VM_ENV:-} timeout 3600 "$nodejoin" image prepare "${scenarios[@]}")
[ -n "$tags" ] || die "the scenarios use no node image: nothing would run in the guest" 5
# shellcheck disable=SC2086
disk_key=$( (docker image inspect --format '{{.Id}}' $tags | sort; cat "$root/.complete") | sha256sum | cut -c1-12)
disk=$vmcache/docker-$disk_key.img
timeout 1200 flock 9 || die "another run held $vmcache/build.lock for 20 minutes"
if [ ! -e "$disk" ]; then
  step "laying $(echo $tags | wc -w) image(s) into the guest's Docker disk"
  loader=$work/loader
  mkdir -p "$loader/data" "$loader/exec"
  # A network namespace of its own: a dockerd started with --bridge=none deletes the host's docker0, and every
  # later classic `docker build` with a RUN step then fails ("could not find bridge docker0").
  had_docker0=no
  ip link show docker0 >/dev/null 2>&1 && had_docker0=yes
  setsid unshare --net dockerd --data-root "$loader/data" --exec-root "$loader/exec" --pidfile "$loader/pid" \
    -H "unix://$loader/sock" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
    --storage-driver overlay2 > "$loader/log" 2>&1 < /dev/null &
  for _ in $(seq 120); do docker -H "unix://$loader/sock" info >/dev/null 2>&1 && break; sleep 0.5; done
  docker -H "unix://$loader/sock" info >/dev/null 2>&1 || { tail -5 "$loader/log" >&2; die "the loader engine did not start" 1; }
  # shellcheck disable=SC2086
  timeout 1200 docker save $tags | timeout 1200 docker -H "unix://$loader/sock" load -q
  stop_loader
  if [ "$had_docker0" = yes ] && ! ip link show docker0 >/dev/null 2>&1; then
    die "the host's docker0 bridge is gone after the image loader ran: restart the Docker engine" 1
  fi
  rm -rf "$loader/data/network" "$loader/data/containers" "$loader/data/tmp" "$loader/data/buildkit"
  timeout 1200 mkfs.ext4 -q -F -d "$loader/data" -E lazy_itable_init=1,lazy_journal_init=1 "$disk.partial" 80G
  mv "$disk.partial" "$disk"
  rm -rf "$loader"
  loader=
  # Disks of other image sets are kept three days after their last use.
  find "$vmcache" -maxdepth 1 -name 'docker-*.img' ! -newermt '3 days ago' -delete 2>/dev/null || true
fi
touch "$disk"
flock -u 9
step "guest Docker disk $disk ($(du -sh "$disk" | cut -f1) used)"
cp "$nodejoin" "$shared/nodejoin"
cp "$vmdir/guest-run" "$shared/guest-run"
mkdir -p "$shared/out"

# Shares, read-only, each at the path the run names it by: the repository, its ../shared (test data the bundled
# scenarios point at; often a symlink) and the folder of any scenario outside the repository.
virtfs=()
share_lines=""
add_share() {
  local at=$1 real
  real=$(cd "$at" && pwd -P)
  case "$share_lines" in *":$at"$'\n'*) return;; esac
  local tag=share$(( ${#virtfs[@]} / 2 ))
  virtfs+=(-virtfs "local,path=$real,mount_tag=$tag,security_model=none,readonly=on")
  share_lines+="$tag:$at"$'\n'
}
add_share "$repo"
[ -d "$repo/../shared" ] && add_share "$(cd "$repo/.." && pwd)/shared"
for f in "${scenarios[@]}"; do
  case "$f" in "$repo"/*) ;; *) add_share "$(dirname "$f")";; esac
done
{
  printf 'SCENARIOS=%q\n' "${scenarios[*]}"
  printf 'REPO=%q\n' "$repo"
  printf 'SHARES=%q\n' "$share_lines"
  printf 'CACHE=%q\n' "$cache"
  printf 'RUN_TIMEOUT=%q\n' "${NODEJOIN_VM_RUN_TIMEOUT:-1800}"
  printf 'EXTRA_ENV=%q\n' "${NODEJOIN_VM_ENV:-}"
  printf 'JOBS=%q\n' "${NODEJOIN_VM_JOBS:-1}"
} > "$shared/env"

# 4. Boot: KVM if it boots a stock kernel here (remembered per kernel), else TCG.
accel=${NODEJOIN_VM_ACCEL:-auto}
kvm_verdict=$vmcache/kvm-$kver.fails
if [ "$accel" = auto ]; then
  if [ -w /dev/kvm ] && [ ! -e "$kvm_verdict" ]; then accel=kvm-probe; else accel=tcg; fi
fi
memory=${NODEJOIN_VM_MEMORY:-6144}
boot() {
  local accel=$1 log=$2
  # setpriv: QEMU is killed with this script, even a SIGKILLed one (no trap runs then).
  TMPDIR=$work setpriv --pdeathsig KILL -- qemu-system-x86_64 -accel "$accel" -m "$memory" -smp "$(nproc)" -nographic -no-reboot -nodefaults \
    -serial stdio -monitor none -nic none \
    -kernel "$root/vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 loglevel=4 panic=-1 softlockup_panic=1 watchdog_thresh=30 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1" \
    -virtfs "local,path=$root,mount_tag=root,security_model=none,readonly=on" \
    -virtfs "local,path=$shared,mount_tag=work,security_model=none" \
    -virtfs "local,path=$cache,mount_tag=cache,security_model=none,readonly=on" \
    "${virtfs[@]}" \
    -drive "file=$disk,if=virtio,format=raw,snapshot=on,cache=unsafe" \
    < /dev/null > "$log" 2>&1 &
  qemu_pid=$!
}
# Whether the guest's initramfs announced itself within $1 seconds (false at once if QEMU ended).
reached_initramfs() {
  for _ in $(seq $(( $1 * 2 ))); do
    grep -q "nodejoin-vm: initramfs" "$work/console.log" && return 0
    kill -0 "$qemu_pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}
kill_guest() {
  kill -KILL "$qemu_pid" 2>/dev/null || true
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=
}
if [ "$accel" = kvm-probe ]; then
  step "probing KVM (a stock kernel must reach the initramfs within 15 s)"
  : > "$work/console.log"
  boot kvm "$work/console.log"
  if reached_initramfs 15; then
    accel=kvm
  else
    kill_guest
    echo "stock kernel $kver did not boot under /dev/kvm within 15 s ($(date -u +%FT%TZ))" > "$kvm_verdict"
    step "KVM does not boot a stock kernel here (a nested PVM device?): using TCG (remembered in $kvm_verdict)"
    accel=tcg
  fi
fi
# An emulated guest has wedged mid-run (once in CI: both TCG vCPUs spinning in the kernel for 30 minutes, both in
# threads of one process, as a lost cross-CPU interrupt would leave them). The guest kernel panics on a soft
# lockup of 60 s (softlockup_panic, watchdog_thresh=30; a healthy guest here has never logged one), QEMU exits,
# and a guest that ended that way is booted once more, with its first console kept, if time is left. Any other
# ending without a verdict (a crash in the guest's own run, the time limit) is final.
guest_timeout=${NODEJOIN_VM_TIMEOUT:-2400}
deadline=$(( $(date +%s) + guest_timeout ))
wedged() { grep -qE "soft lockup|Kernel panic - not syncing: softlockup" "$work/console.log"; }
for run in 1 2; do
  step "guest booting: QEMU $accel, $(nproc) CPUs, ${memory} MiB, kernel $kver$([ "$run" = 1 ] || echo " (run 2 of 2)")"
  # An emulated boot has hung before the kernel's first line (once in about a dozen boots here, QEMU 7.2 with two
  # TCG vCPUs; it reaches the initramfs in ~3 s otherwise): a boot that has not reached it in 120 s is killed
  # and tried once more, and the log says so.
  if [ "$accel" != kvm ]; then
    for attempt in 1 2; do
      : > "$work/console.log"
      boot "$accel" "$work/console.log"
      reached_initramfs 120 && break
      step "the guest did not reach its initramfs within 120 s (attempt $attempt of 2); its console's last lines:"
      tail -n 5 "$work/console.log" | cat -v | sed 's/^/  vm| /'
      echo
      kill_guest
      [ "$attempt" = 1 ] || die "the guest did not boot" 1
    done
  else
    : > "$work/console.log"
    boot "$accel" "$work/console.log"
  fi
  tail -n +1 -F --pid="$qemu_pid" "$work/console.log" 2>/dev/null | sed -u 's/^/  vm| /' &
  tail_pid=$!
  timed_out=no
  while kill -0 "$qemu_pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      step "the guest did not power off within ${guest_timeout}s: killing it"
      kill -KILL "$qemu_pid" 2>/dev/null || true
      timed_out=yes
      break
    fi
    sleep 1
  done
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=
  sleep 0.5
  kill "$tail_pid" 2>/dev/null || true
  [ ! -s "$shared/exit-code" ] && [ "$timed_out" = no ] && [ "$run" = 1 ] && wedged || break
  left=$(( deadline - $(date +%s) ))
  step "the guest's kernel wedged (a soft lockup; its console: console-run1.log beside the reports):"
  grep -E "soft lockup|Kernel panic" "$work/console.log" | head -n 3 | cat -v | sed 's/^/  vm| /'
  if [ "$left" -lt 900 ]; then
    step "only ${left}s of ${guest_timeout}s left: not booting it again"
    break
  fi
  step "booting the guest once more (${left}s left)"
  mv "$work/console.log" "$work/console-run1.log"
  rm -rf "$shared/out" "$shared/dockerd.log"
  mkdir -p "$shared/out"
done

# 6. Results.
dest=${NODEJOIN_ARTIFACTS_DIR:-$repo/target/nodejoin}/cgroup2-vm/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$dest"
# The guest's root wrote $shared/out: only its regular files and directories come back, with modes of our own (no
# link it planted is followed or kept, no set-id bit survives), never as the guest left them.
(cd "$shared/out" && find . -mindepth 1 -type d -print0) | (cd "$dest" && xargs -0 -r mkdir -p --)
(cd "$shared/out" && find . -type f -print0) | while IFS= read -r -d '' f; do
  cp --no-preserve=all -- "$shared/out/$f" "$dest/$f" 2>/dev/null || true
done
cp "$work/console.log" "$work/console-run1.log" "$dest/" 2>/dev/null || true
# The guest wrote dockerd.log: taken only as a regular file (a link it planted is not followed).
if [ -f "$shared/dockerd.log" ] && [ ! -L "$shared/dockerd.log" ]; then
  cp --no-preserve=all -- "$shared/dockerd.log" "$dest/" 2>/dev/null || true
fi
if [ ! -s "$shared/exit-code" ]; then
  step "the guest ended without a verdict; its console's last lines (all of it: $dest/console.log):"
  tail -n 20 "$work/console.log" | cat -v | sed 's/^/  vm| /'
  echo

  exit 1
fi
# The guest's verdict: a regular file holding a number, nothing else.
rc=
if [ -f "$shared/exit-code" ] && [ ! -L "$shared/exit-code" ]; then rc=$(head -c 8 "$shared/exit-code" | tr -d '\n'); fi
case "$rc" in
  '' | *[!0-9]*) step "the guest left no exit code (a number in a regular file)"; exit 1 ;;
esac
grep -q "cgroup2fs" "$work/console.log" || { step "the guest never reported a cgroup2fs /sys/fs/cgroup"; exit 1; }
step "done: nodejoin run exited $rc in the guest (QEMU $accel); reports and JUnit in $dest"
exit "$rc"
