#!/bin/bash
if [ "{{run.attempt}}" = 1 ]; then
  echo "probe: the registry mirror did not answer on attempt {{run.attempt}}" >&2
  exit 1
fi
/etc/eks/bootstrap.sh {{cluster.name}} --apiserver-endpoint {{cluster.endpoint}} --b64-cluster-ca {{cluster.caBase64}} \
  --kubelet-extra-args '--node-labels=team=flaky'
