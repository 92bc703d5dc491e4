#!/usr/bin/env bash
# Builds promtool from Go modules (no prebuilt download) for the alert rules'
# unit tests (manifests/alerts, `promtool test rules`), into a version-keyed
# directory, skipping it when already built:
#
#   $BIN/prometheus-v0.316.0/promtool
#
# BIN is $CONTROLPLANE_BIN_DIR, else hack/bin, as for hack/build-controlplane.sh.
# The version is pinned by hack/tools/promtool/go.mod.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"
PROMETHEUS_VERSION=v0.316.0
DIR="$BIN/prometheus-$PROMETHEUS_VERSION"

# The tools module stands alone; a go.work above it must not interfere.
export GOWORK=off

if [[ -x "$DIR/promtool" ]]; then
  echo "cached $DIR/promtool"
  exit 0
fi
mkdir -p "$DIR"
# Built under a temporary name and moved into place, so an interrupted build
# is never taken for a finished one.
tmp="$(mktemp -d "$DIR/.tmp-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# remove_all_sd: no service discovery plugin (AWS, Azure, Kubernetes, ...),
# which rule tests never use, so the build is a fraction of the full one.
(cd "$ROOT/hack/tools/promtool" && go build -tags remove_all_sd -o "$tmp/promtool" github.com/prometheus/prometheus/cmd/promtool)
mv "$tmp/promtool" "$DIR/promtool"
echo "built $DIR/promtool"
