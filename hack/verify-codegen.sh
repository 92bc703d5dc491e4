#!/usr/bin/env bash
# Fails if the committed generated code or CRD manifests differ from what
# hack/update-codegen.sh produces. It generates into a temporary copy of the
# tree, so the working tree is never modified.
set -o errexit
set -o nounset
set -o pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# Everything update-codegen.sh writes lives under these paths (the chart's
# files/ are copies of manifests/, made by hack/update-chart.sh).
GENERATED=(apis pkg/generated manifests/crd manifests/components docs/api-reference.md docs/flags.md charts/controller-manager/files
    manifests/rbac charts/controller-manager/templates README.md docs/operations.md)

TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

cd "${REPO_ROOT}"
# Copy tracked and untracked-but-not-ignored files: the tree as it would be committed.
git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [[ -e "${f}" ]] && printf '%s\0' "${f}"; done \
    | tar --null -T - -cf - \
    | tar -C "${TMP}" -xf -

# Reuse this tree's built generators; they are rebuilt only if stale.
CODEGEN_GOBIN="${CODEGEN_GOBIN:-${REPO_ROOT}/hack/bin/codegen}" \
    "${TMP}/hack/update-codegen.sh" >"${TMP}/update-codegen.log" 2>&1 || {
    cat "${TMP}/update-codegen.log" >&2
    echo "hack/update-codegen.sh failed in a copy of the tree" >&2
    exit 1
}

status=0
for path in "${GENERATED[@]}"; do
    if ! diff -ruN "${REPO_ROOT}/${path}" "${TMP}/${path}" >"${TMP}/diff" 2>&1; then
        cat "${TMP}/diff"
        status=1
    fi
done

if [[ "${status}" != 0 ]]; then
    echo >&2
    echo "Generated code is out of date (diff above: - committed, + regenerated)." >&2
    echo "Run hack/update-codegen.sh and commit the result." >&2
    exit 1
fi
echo "Generated code is up to date."
