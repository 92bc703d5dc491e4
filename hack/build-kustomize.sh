#!/usr/bin/env bash
# Builds the kustomize CLI the manifests are tested with beside kubectl's
# embedded one (v5.8.1 in kubectl 1.36, the newest minor): the oldest that
# users have, from Go modules, into a version-keyed directory, unless
# already built:
#
#   $BIN/kustomize-v5.0.1/kustomize
#
# and prints its path (progress goes to stderr). BIN is
# $CONTROLPLANE_BIN_DIR, else hack/bin. make kustomize runs it; make test
# needs it (test/integration/manifests). `go install module@version` builds
# each release with its own go.mod, checked against the checksum database.
# Built under a temporary name and moved into place, so an interrupted
# build is never taken for a finished one.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"
# Keep in step with KustomizeVersions in test/integration/framework and
# docs/kustomize.md. v5.0.1: the oldest v5 the module proxy serves (v5.0.0
# is not installable: its go.mod has replace directives), as in kubectl
# 1.27. The newest, v5.8, is kubectl's (v5.8.3 needs Go 1.27): a build of
# v5.8.2 alone cost 138 s on a cold machine and renders the same.
KUSTOMIZE_VERSIONS=(v5.0.1)

# The release's own module stands alone; a go.work above must not interfere.
export GOWORK=off GOFLAGS=-mod=mod
for version in "${KUSTOMIZE_VERSIONS[@]}"; do
  dir="$BIN/kustomize-$version"
  if [[ -x "$dir/kustomize" ]]; then
    echo "cached $dir/kustomize" >&2
  else
    mkdir -p "$dir"
    tmp="$(mktemp -d "$dir/.tmp-build.XXXXXX")"
    GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
      "sigs.k8s.io/kustomize/kustomize/v5@$version"
    mv "$tmp/kustomize" "$dir/kustomize"
    rm -rf "$tmp"
    echo "built $dir/kustomize" >&2
  fi
  echo "$dir/kustomize"
done
