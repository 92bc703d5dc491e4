#!/usr/bin/env bash
# Regenerates everything derived from apis/: deepcopy functions, the typed
# clientset, listers, informers and apply configurations in pkg/generated/,
# the CRD manifests in manifests/crd/, docs/api-reference.md from them,
# docs/flags.md and the README's table of controllers from the manager's
# flags and registry, the controllers' RBAC (kustomize's
# and the chart's) from their descriptors (hack/rbacgen), the
# PrometheusRule of manifests/components/alerts from the rule file
# manifests/alerts/alerts.yaml, and the chart's copies of the CRDs, alerts and
# dashboard (hack/update-chart.sh).
#
# The generators are pinned by hack/tools/codegen/go.mod and built from
# source into hack/bin/codegen (or $CODEGEN_GOBIN); nothing is downloaded
# but Go modules.
set -o errexit
set -o nounset
set -o pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TOOLS_DIR="${REPO_ROOT}/hack/tools/codegen"
MODULE="github.com/ndsl/controller-manager"
BOILERPLATE="${REPO_ROOT}/hack/boilerplate.go.txt"

cd "${REPO_ROOT}"
# The tools module stands alone; a go.work above it must not interfere.
export GOWORK=off
# kube_codegen.sh greps these for stale files before generating into them.
mkdir -p pkg/generated/{applyconfiguration,clientset,listers,informers}

# kube_codegen.sh runs `go install k8s.io/code-generator/cmd/...` inside the
# code-generator module found here, so the generators it builds are exactly the
# version hack/tools/codegen/go.mod pins, built against that release's own go.sum.
go -C "${TOOLS_DIR}" mod download k8s.io/code-generator
CODEGEN_PKG="$(go -C "${TOOLS_DIR}" list -m -f '{{.Dir}}' k8s.io/code-generator)"
export GOBIN="${CODEGEN_GOBIN:-${REPO_ROOT}/hack/bin/codegen}"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${REPO_ROOT}/apis"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --output-dir "${REPO_ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${REPO_ROOT}/apis"

echo "Generating CRD manifests"
# Remove old CRDs first so that a deleted kind does not leave its file behind.
find "${REPO_ROOT}/manifests/crd" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml -delete
go tool -modfile="${TOOLS_DIR}/go.mod" controller-gen \
    crd \
    paths=./apis/... \
    output:crd:artifacts:config=manifests/crd

echo "Generating docs/api-reference.md"
go run ./hack/apidocs --crds manifests/crd --out docs/api-reference.md
echo "Generating docs/flags.md and the README's table of controllers"
go run ./hack/flagdocs --out docs/flags.md
echo "Generating the controllers' RBAC (manifests/rbac/controllers, manifests/components, the chart) from their descriptors"
go run ./hack/rbacgen
echo "Generating the PrometheusRule from manifests/alerts/alerts.yaml"
go run ./hack/prometheusrule manifests/alerts/alerts.yaml >manifests/components/alerts/prometheusrule.yaml
echo "Copying the CRDs, alerts and dashboard into the Helm chart"
"${REPO_ROOT}/hack/update-chart.sh"
