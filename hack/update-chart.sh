#!/usr/bin/env bash
# Copies into the Helm chart (charts/controller-manager/files/) what it
# shares with manifests/, which stays the single source:
#
#   manifests/crd/*.yaml                 -> files/crds/   (the generated CRDs)
#   manifests/policies/*.yaml            -> files/policies/ (the admission policies)
#   manifests/alerts/alerts.yaml         -> files/alerts.yaml
#   the Grafana dashboard's JSON         -> files/dashboard.json
#
# hack/update-codegen.sh runs it after generating the CRDs, and
# hack/verify-codegen.sh fails when a copy is stale.
set -o errexit
set -o nounset
set -o pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
FILES="${REPO_ROOT}/charts/controller-manager/files"
cd "${REPO_ROOT}"

# A CRD deleted from manifests/crd leaves the chart too.
rm -rf "${FILES}/crds"
mkdir -p "${FILES}/crds"
for crd in manifests/crd/*.yaml; do
    [[ "$(basename "${crd}")" == kustomization.yaml ]] && continue
    cp "${crd}" "${FILES}/crds/"
done
rm -rf "${FILES}/policies"
mkdir -p "${FILES}/policies"
for policy in manifests/policies/*.yaml; do
    case "$(basename "${policy}")" in kustomization.yaml | kustomizeconfig.yaml) continue ;; esac
    cp "${policy}" "${FILES}/policies/"
done
cp manifests/alerts/alerts.yaml "${FILES}/alerts.yaml"
# The dashboard lives with the kustomize component that installs it.
cp manifests/components/grafana/dashboard.json "${FILES}/dashboard.json"
