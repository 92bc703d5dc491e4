#!/usr/bin/env bash
# Builds the helm CLI from Go modules (hack/tools/helm pins it) into a
# version-keyed directory, unless already built:
#
#   $BIN/helm-v4.2.4/helm
#
# and prints its path (progress goes to stderr): HELM=$(hack/build-helm.sh).
# BIN is $CONTROLPLANE_BIN_DIR, else hack/bin, beside the control plane's
# binaries. make helm runs it; make test needs it for helm lint and the
# chart's tests (test/integration/chart), make e2e-kind for helm install.
# Built under a temporary name and moved into place, so an interrupted
# build is never taken for a finished one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"
# Keep in step with hack/tools/helm/go.mod and the chart tests' helmVersion.
HELM_VERSION=v4.2.4
DIR="$BIN/helm-$HELM_VERSION"

if [[ -x "$DIR/helm" ]]; then
  echo "cached $DIR/helm" >&2
  echo "$DIR/helm"
  exit 0
fi
# The tools module stands alone; a go.work above it must not interfere.
export GOWORK=off
mkdir -p "$DIR"
tmp="$(mktemp -d "$DIR/.tmp-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# helm reports the version its release Makefile sets this way. The flags are
# the control plane's, whose compiled packages this build reuses.
(cd "$ROOT/hack/tools/helm" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  -o "$tmp/helm" helm.sh/helm/v4/cmd/helm)
mv "$tmp/helm" "$DIR/helm"
echo "built $DIR/helm" >&2
echo "$DIR/helm"
