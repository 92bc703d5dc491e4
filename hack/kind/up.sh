#!/usr/bin/env bash
# make kind-up / make kind-down: a kind cluster running the manager, left for
# the user (the README's quick start).
#
#   hack/kind/up.sh up     Docker, node image, manager image, cluster (one
#                          control plane, two workers), deploy: the stages of
#                          hack/kind/e2e.sh up to its suite, which it skips;
#                          then the cluster's context is merged into
#                          $KUBECONFIG (else ~/.kube/config), as `kind create
#                          cluster` does
#   hack/kind/up.sh down   deletes the cluster (and its context)
#
# Run again, `up` reuses the cluster, loads the image built now and restarts
# the manager's pods so that they run it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
KIND_CLUSTER="${KIND_CLUSTER:-ndsl}"
# Not :latest, whose pull policy Always would make the kubelet look for the
# image in a registry instead of the one loaded into the nodes.
IMG="${IMG:-controller-manager:kind}"
E2E_ARTIFACTS="${E2E_ARTIFACTS:-_output/kind}"
NAMESPACE=ndsl-system
export PATH="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}/kube-v1.36.3:$PATH"

log() { echo "[$(date +%T)] kind-up: $*" >&2; }

# kind_cli makes Docker answer and sets KIND. docker.sh's CLI shim stays off
# PATH here: only `kind create cluster` needs it, and e2e.sh sets it up.
kind_cli() {
  hack/kind/docker.sh >/dev/null
  KIND=$(hack/kind/build-node-image.sh kind)
}

up() {
  kind_cli
  local existed=false
  # Not grep -q: under pipefail, kind killed by SIGPIPE would fail the test.
  if "$KIND" get clusters 2>/dev/null | grep -x "$KIND_CLUSTER" >/dev/null; then existed=true; fi
  KIND_UP=1 KEEP_CLUSTER=1 KIND_CLUSTER="$KIND_CLUSTER" IMG="$IMG" E2E_ARTIFACTS="$E2E_ARTIFACTS" hack/kind/e2e.sh
  "$KIND" export kubeconfig --name "$KIND_CLUSTER"
  if $existed; then
    # The same tag with new content: only new pods run the image just loaded.
    kubectl -n "$NAMESPACE" rollout restart deployment/controller-manager
    kubectl -n "$NAMESPACE" rollout status deployment/controller-manager --timeout=3m
  fi
  cat >&2 <<EOF

The manager runs in the kind cluster "$KIND_CLUSTER" (kubectl context kind-$KIND_CLUSTER):
  kubectl -n $NAMESPACE get pods
  kubectl apply -f manifests/samples/app.yaml && kubectl get apps.ingress.example.com
Delete the cluster with: make kind-down KIND_CLUSTER=$KIND_CLUSTER
EOF
}

down() {
  kind_cli
  "$KIND" delete cluster --name "$KIND_CLUSTER"
}

case "${1:-up}" in
up) up ;;
down) down ;;
*)
  echo "usage: $0 [up|down]" >&2
  exit 2
  ;;
esac
