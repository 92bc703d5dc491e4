#!/usr/bin/env bash
# Runs the full local control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok with fake nodes kwok-node-1..3)
# until Ctrl-C or SIGTERM. State, logs and the kubeconfig are in _local/.
# Flags go to hack/localup, e.g. --ready-file=FILE (written once ready).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
hack/build-controlplane.sh >&2
# Built and exec'd rather than `go run`: go run does not pass SIGTERM on to
# the program, which must get it to stop every component.
BIN="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"
go build -o "$BIN/localup" ./hack/localup
exec "$BIN/localup" "$@"
