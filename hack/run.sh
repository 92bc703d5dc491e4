#!/usr/bin/env bash
# make run: runs the controller manager in the foreground.
#   - With $KUBECONFIG set: installs the CRDs there and runs the controllers
#     against it (no webhooks: that API server cannot call this machine).
#   - Without: starts the local control plane (hack/local-up.sh) in the
#     background, waits until it is ready, installs the CRDs and the webhook
#     configurations (pointed at 127.0.0.1:9443), runs the manager with its
#     webhooks against it, and stops the control plane on exit.
# Extra manager flags: make run ARGS="--controllers=*,cleanup -v=2"
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"
KUBECTL="$BIN/kube-v1.36.3/kubectl"

if [[ -z "${KUBECONFIG:-}" ]]; then
  mkdir -p _local
  ready="_local/ready"
  rm -f "$ready"
  hack/local-up.sh --ready-file="$ready" >_local/local-up.log 2>&1 &
  localup=$!
  trap 'kill -TERM "$localup" 2>/dev/null; wait "$localup" 2>/dev/null || true' EXIT
  echo "Starting the local control plane (log: _local/local-up.log)..." >&2
  for _ in $(seq 1 600); do
    [[ -f "$ready" ]] && break
    if ! kill -0 "$localup" 2>/dev/null; then
      echo "The local control plane failed to start:" >&2
      tail -20 _local/local-up.log >&2
      exit 1
    fi
    sleep 1
  done
  [[ -f "$ready" ]] || { echo "The local control plane did not get ready in 10 minutes" >&2; exit 1; }
  export KUBECONFIG="$ROOT/_local/kubeconfig"
  echo "Local control plane ready: export KUBECONFIG=$KUBECONFIG" >&2
else
  hack/build-controlplane.sh >&2 # for kubectl
fi

if [[ -n "${localup:-}" ]]; then
  # The local API server calls the manager's webhooks on 127.0.0.1:9443: the
  # CRDs and webhook configurations of manifests/default, pointed there. The
  # manager issues its CA and serving certificate (for 127.0.0.1) into the
  # Secret default/controller-manager-webhook-certs and fills in every caBundle.
  go build -o _output/webhook-url ./hack/webhook-url
  "$KUBECTL" kustomize manifests/default | _output/webhook-url --base=https://127.0.0.1:9443 | "$KUBECTL" apply -f - >&2
  webhook_flags=(--webhook-address=127.0.0.1 --webhook-port=9443 --webhook-cert-extra-names=127.0.0.1 --webhook-namespace=default)
else
  # A cluster's API server cannot call a webhook on this machine: controllers
  # only, and manifests/crd, which serves v1beta1 alone (v1 needs the
  # conversion webhook; make deploy's manifests/default serves it).
  "$KUBECTL" apply -k manifests/crd >&2
  webhook_flags=(--webhooks=false)
fi
# The design notes' sample has no spec.namespace: its children go to
# --pipeline-namespace, which the manager does not create.
"$KUBECTL" apply -k manifests/pipeline-namespace >&2
# Not exec: the trap above must stop the control plane when the manager exits.
_output/controller-manager --kubeconfig="$KUBECONFIG" --leader-elect=false --secure-serving=false "${webhook_flags[@]}" ${ARGS:-}
