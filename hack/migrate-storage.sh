#!/usr/bin/env bash
# Storage-version migration of the manager's CRDs (docs/operations: "Storage
# versions"). After an upgrade that changes a CRD's storage version, objects
# already in etcd stay at the old version until something writes them. This
# rewrites every object at the current storage version, then records that
# version as the only one stored, so that a later release may stop serving
# the old one.
#
#   hack/migrate-storage.sh [crd ...]
#       default: apps.ingress.example.com pipelines.distri-infer.ndsl.cn
#
# KUBECTL is the kubectl to run (default: kubectl on PATH); the cluster is
# the one of $KUBECONFIG. Needs the conversion webhook up (the manager
# running), since reading the old version converts it.
#
# Safe to run while users and the manager write, and to rerun: each object is
# replaced at the resourceVersion it was read at. The API server writes it
# only if its stored bytes change, that is, only if it is still at another
# version. A Conflict or NotFound means someone wrote or deleted it since the
# read, which stores it at the new version too.
set -euo pipefail

KUBECTL="${KUBECTL:-kubectl}"
crds=("$@")
[ ${#crds[@]} -gt 0 ] || crds=(apps.ingress.example.com pipelines.distri-infer.ndsl.cn)

log() { echo "migrate-storage: $*" >&2; }

migrate() {
  local crd=$1 group plural storage out rc
  group=$("$KUBECTL" get crd "$crd" -o jsonpath='{.spec.group}')
  plural=$("$KUBECTL" get crd "$crd" -o jsonpath='{.spec.names.plural}')
  storage=$("$KUBECTL" get crd "$crd" -o jsonpath='{.spec.versions[?(@.storage==true)].name}')
  log "$crd: rewriting every object at the storage version $storage"

  rc=0
  out=$("$KUBECTL" get "$plural.$storage.$group" --all-namespaces -o json |
    "$KUBECTL" replace -f - 2>&1) || rc=$?
  local replaced failed
  replaced=$(grep -c ' replaced$' <<<"$out" || true)
  # Every other line must be a Conflict or a NotFound: written or deleted
  # since it was read.
  # (Warnings, such as a deprecated version's, are not failures.)
  failed=$(grep -v ' replaced$' <<<"$out" | grep -v -e 'the object has been modified' -e 'NotFound' -e '^Warning: ' -e '^$' || true)
  if [ -n "$failed" ] || { [ $rc -ne 0 ] && ! grep -q -e 'the object has been modified' -e 'NotFound' <<<"$out"; }; then
    log "$crd: rewriting failed; nothing recorded, rerun when the cause is fixed:"
    echo "$failed" >&2
    return 1
  fi
  log "$crd: $replaced objects rewritten (or already at $storage)"

  "$KUBECTL" patch crd "$crd" --subresource=status --type=merge \
    -p "{\"status\":{\"storedVersions\":[\"$storage\"]}}" >/dev/null
  log "$crd: status.storedVersions = [$storage]"
}

for crd in "${crds[@]}"; do
  migrate "$crd"
done
