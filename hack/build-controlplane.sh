#!/usr/bin/env bash
# Builds the local control plane binaries from Go modules (no prebuilt
# downloads) into version-keyed directories, skipping those already built:
#
#   $BIN/kube-v1.36.3/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
#   $BIN/etcd-v3.6.16/etcd
#   $BIN/kwok-v0.7.0/kwok
#
#   hack/build-controlplane.sh [kubectl]   (kubectl: only kubectl, for make deploy)
#
# BIN is $CONTROLPLANE_BIN_DIR, else hack/bin. pkg/testing/controlplane runs
# them. Each binary is built under a temporary name and moved into place, so an
# interrupted build is never taken for a finished one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"
KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.7.0

KUBE_DIR="$BIN/kube-$KUBE_VERSION"
ETCD_DIR="$BIN/etcd-$ETCD_VERSION"
KWOK_DIR="$BIN/kwok-$KWOK_VERSION"

# The tools modules stand alone; a go.work above them must not interfere.
export GOWORK=off

mkdir -p "$KUBE_DIR" "$ETCD_DIR" "$KWOK_DIR"

TMP_DIRS=()
cleanup() {
  local d
  for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do rm -rf "$d"; done
}
trap cleanup EXIT

# new_tmp DIR: sets tmp to a fresh directory inside DIR (same filesystem, so
# mv is atomic), removed at exit. Not $(...): that would lose TMP_DIRS.
new_tmp() {
  tmp="$(mktemp -d "$1/.tmp-build.XXXXXX")"
  TMP_DIRS+=("$tmp")
}

# adopt_unversioned NAME: an earlier layout put the Kubernetes binaries directly
# in $BIN; move one into $KUBE_DIR if it reports the right version (a partly
# written file does not).
adopt_unversioned() {
  local name="$1" old="$BIN/$1"
  [[ -x "$old" && ! -e "$KUBE_DIR/$name" ]] || return 0
  if "$old" --version 2>/dev/null | grep -q "Kubernetes $KUBE_VERSION\$"; then
    mv "$old" "$KUBE_DIR/$name"
  fi
}

# Kubernetes: all missing binaries in one go build, which shares compilation.
KUBE_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
ONLY_KUBECTL=false
case "${1:-}" in
"") ;;
kubectl)
  KUBE_CMDS=(kubectl)
  ONLY_KUBECTL=true
  ;;
*)
  echo "usage: $0 [kubectl]" >&2
  exit 2
  ;;
esac
missing=()
for name in "${KUBE_CMDS[@]}"; do
  adopt_unversioned "$name"
  if [[ -x "$KUBE_DIR/$name" ]]; then
    echo "cached $KUBE_DIR/$name"
  else
    missing+=("$name")
  fi
done
if ((${#missing[@]} > 0)); then
  new_tmp "$KUBE_DIR"
  pkgs=()
  for name in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$name"); done
  # Without these the binaries report v0.0.0-master+$Format:%H$, which kubectl
  # cannot parse. client-go's copy of the version goes into User-Agent headers.
  ldflags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
  done
  # The Makefile's build flags: the tests, make build and helm reuse what
  # this compiles (hack/verify-shared-versions.sh).
  (cd "$ROOT/hack/tools/kube" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
  for name in "${missing[@]}"; do
    mv "$tmp/$name" "$KUBE_DIR/$name"
    echo "built $KUBE_DIR/$name"
  done
fi

$ONLY_KUBECTL && exit 0

# etcd: go install does not work because of the server module's replace directives.
if [[ -x "$ETCD_DIR/etcd" ]]; then
  echo "cached $ETCD_DIR/etcd"
else
  new_tmp "$ETCD_DIR"
  (cd "$ROOT/hack/tools/etcd" && go build -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  mv "$tmp/etcd" "$ETCD_DIR/etcd"
  echo "built $ETCD_DIR/etcd"
fi

# kwok v0.7.0: it has default node and pod stages built in (v0.8.0 has none).
if [[ -x "$KWOK_DIR/kwok" ]]; then
  echo "cached $KWOK_DIR/kwok"
else
  new_tmp "$KWOK_DIR"
  (cd "$tmp" && GOBIN="$tmp" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  mv "$tmp/kwok" "$KWOK_DIR/kwok"
  echo "built $KWOK_DIR/kwok"
fi
