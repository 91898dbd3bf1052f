#!/usr/bin/env bash
# Prints the rancher/k3s image for a Kubernetes version: the tag `VERSION-k3sN` with the highest N that the k3s
# project has published (it re-releases one Kubernetes version as k3s1, k3s2, ... when it patches k3s itself).
# The workflow pulls what this prints and hands it to the harness as NODEJOIN_K3S_IMAGE; without it the harness
# assumes VERSION-k3s1 (harness/src/cluster/k3s/mod.rs). Nothing to update by hand when a new revision comes out;
# when a Kubernetes version has no k3s release yet, this fails saying which versions of that minor there are.
#
# Usage: k3s-image.sh VERSION            (VERSION like v1.36.3)
# K3S_TAGS_JSON=FILE reads Docker Hub's tag listing from FILE instead of asking Docker Hub (for tests).
set -euo pipefail
version=${1:?usage: k3s-image.sh VERSION}
case "$version" in
  v1.*.*) ;;
  *) echo "k3s-image.sh: version must look like v1.36.3, got '$version'" >&2; exit 2 ;;
esac
minor=${version%.*}
if [ -n "${K3S_TAGS_JSON:-}" ]; then
  listing=$(cat "$K3S_TAGS_JSON")
else
  listing=$(curl -fsSL --retry 3 "https://hub.docker.com/v2/repositories/rancher/k3s/tags?page_size=100&name=${minor}.") \
    || { echo "k3s-image.sh: cannot list rancher/k3s tags on Docker Hub" >&2; exit 3; }
fi
tags=$(printf '%s' "$listing" | jq -r '.results[].name')
escaped=${version//./\\.}
best=$(printf '%s\n' "$tags" | grep -E "^${escaped}-k3s[0-9]+$" \
  | sed -E 's/^.*-k3s([0-9]+)$/\1 &/' | sort -n | tail -n1 | cut -d' ' -f2 || true)
if [ -z "$best" ]; then
  have=$(printf '%s\n' "$tags" | grep -E "^${minor//./\\.}\.[0-9]+-k3s[0-9]+$" | sort -uV | paste -sd' ' - || true)
  echo "k3s-image.sh: rancher/k3s has no ${version}-k3sN tag; published for ${minor}: ${have:-none}" >&2
  exit 4
fi
echo "rancher/k3s:$best"
