#!/usr/bin/env bash
# A disk of your own, as a user brings one: keeps a CA for AWS's names (`nodejoin image endpoints-ca`, under
# target/own-disk/ca: a test CA of this checkout, never committed), writes the AL2023 node of
# scenarios/vm-al2023.yaml as an export-shaped disk that trusts it and boots under UEFI and BIOS (`nodejoin image
# export-disk`), and runs ci/own-disk/vm-own-disk.yaml (UEFI, on NVMe, observed from outside, as an AMI) and
# ci/own-disk/vm-own-disk-agent.yaml (BIOS, on virtio, read inside through the disk's own guest agent, as a Packer
# build that runs one) with NODEJOIN_ENDPOINTS_CA naming the CA; then its deliberate break,
# ci/own-disk/vm-own-disk-untrusted.yaml (BIOS, on NVMe), without the setting (the disk refuses the run's fresh CA,
# and the run must say so); and ci/own-disk/vm-own-disk-no-loader.yaml, a disk of zeros neither firmware finds
# anything to boot on (the run must say so from the console). `nodejoin run` exits non-zero unless each scenario ran
# and passed (5 when one was ignored). The two runs without a guest agent judge cloud-init's and nodeadm's reports
# (and vm-own-disk.yaml the files the bootstrap wrote) from the machine's disk, read after its shutdown; they must
# then have their logs read from it (the journal, cloud-init's logs) in their artifacts.
#
# Usage: ci/own-disk.sh   (from anywhere; the disk is rewritten each time)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
dir=target/own-disk
mkdir -p "$dir"
nodejoin() { cargo run -q --bin nodejoin -- "$@"; }
ca=$(nodejoin image endpoints-ca "$dir/ca")
nodejoin image export-disk scenarios/vm-al2023.yaml --group workers --format qcow2 --trust "$ca" \
  --out "$dir/al2023-export.qcow2"
# The runs without a guest agent keep their artifacts here: their logs, read from the machine's disk after its
# shutdown, are checked below.
art=$repo/$dir/artifacts
rm -rf "$art"
NODEJOIN_ARTIFACTS_DIR=$art NODEJOIN_ENDPOINTS_CA="$repo/$dir/ca" nodejoin run ci/own-disk/vm-own-disk.yaml
NODEJOIN_ENDPOINTS_CA="$repo/$dir/ca" nodejoin run ci/own-disk/vm-own-disk-agent.yaml
NODEJOIN_ARTIFACTS_DIR=$art env -u NODEJOIN_ENDPOINTS_CA cargo run -q --bin nodejoin -- run \
  ci/own-disk/vm-own-disk-untrusted.yaml
# `logs SCENARIO FILE TEXT`: the node's artifact FILE holds TEXT.
logs() {
  local node
  node=$(find "$art" -mindepth 3 -maxdepth 3 -type d -path "*/$1/ip-*" | head -n 1)
  if [ -z "$node" ] || ! grep -qF -- "$3" "$node/$2"; then
    echo "own-disk.sh: $1: ${node:-(no node artifacts)}/$2 lacks: $3" >&2
    exit 1
  fi
}
# The machine powered off when its power button was pressed, and the journal its own disk kept was read
# (vm-own-disk.yaml's evidence from the kubelet, nodeadm and cloud-init is judged from it): for the break, nodeadm's
# last line before the refused handshake (the DescribeInstances it retries).
for s in vm-own-disk vm-own-disk-untrusted; do
  logs "$s" journal.log "# read from the machine's disk after its shutdown (powered off by its OS"
done
logs vm-own-disk-untrusted nodeadm.log "Enriching configuration.."
logs vm-own-disk-untrusted files/var__log__cloud-init.log "DataSourceEc2Local"
rm -f "$dir/no-loader.raw"
truncate -s 64M "$dir/no-loader.raw"
nodejoin run ci/own-disk/vm-own-disk-no-loader.yaml
