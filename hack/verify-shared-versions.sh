#!/usr/bin/env bash
# Fails if the main module's packages (tests included) or the helm CLI
# (hack/tools/helm) build a module at another version than the control
# plane (hack/tools/kube) builds it.
#
# With one version of each shared module, and one set of build flags
# (CGO_ENABLED=0, -trimpath: the Makefile's), the Go build cache compiles
# k8s.io/api, client-go and the rest once for the control plane, the tests,
# make build and helm, instead of once each (docs/testing.md, "Cold runs").
# A mismatch is not an error of the build, only a slower cold run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GOWORK=off
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# built DIR PACKAGES...: "module version" of every module whose packages
# building PACKAGES in DIR compiles, sorted.
built() {
  local dir=$1
  shift
  (cd "$dir" && go list -deps -test -f '{{with .Module}}{{if .Version}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}' "$@") | sort -u
}

kube_cmds=()
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kubeadm; do
  kube_cmds+=("k8s.io/kubernetes/cmd/$c")
done
built "$ROOT/hack/tools/kube" "${kube_cmds[@]}" >"$tmp/kube"
built "$ROOT" ./... >"$tmp/main"
built "$ROOT/hack/tools/helm" helm.sh/helm/v4/cmd/helm >"$tmp/helm"

status=0
for what in main helm; do
  # Modules both build, at different versions.
  mismatch="$(join "$tmp/kube" "$tmp/$what" | awk '$2 != $3 {print "  " $1 ": " $3 " here, " $2 " in hack/tools/kube"}')"
  if [[ -n $mismatch ]]; then
    where=go.mod
    [[ $what == helm ]] && where=hack/tools/helm/go.mod
    echo "$where builds modules the control plane builds at other versions:" >&2
    echo "$mismatch" >&2
    status=1
  fi
done
if ((status != 0)); then
  echo "Align them (a replace in hack/tools/helm/go.mod, go get in the main module), or the cold build compiles them twice." >&2
  exit 1
fi
echo "Shared modules are at the control plane's versions."
