#!/usr/bin/env bash
# Packages charts/controller-manager for a release (make chart-package):
#
#   hack/package-chart.sh IMAGE VERSION OUTDIR
#
# The package's version is VERSION without its v (semver), its appVersion
# VERSION, and its default image IMAGE (values image.repository, image.tag),
# set in a copy: the chart in the tree keeps its defaults.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image=$1 version=$2 out=$3
helm=$("$ROOT/hack/build-helm.sh")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$ROOT/charts/controller-manager" "$tmp/"
values="$tmp/controller-manager/values.yaml"
# The last colon after the last slash separates the tag (a registry port does not).
repository=${image%:*} tag=${image##*:}
if [[ $image != *:* || $tag == */* ]]; then repository=$image tag=""; fi
sed -i "s|^  repository: controller-manager\$|  repository: $repository|; s|^  tag: \"\"\$|  tag: \"$tag\"|" "$values"
# The helm test's image (tests.image) is released beside it, with the same tag.
sed -i "s|^    repository: controller-manager-chart-test\$|    repository: $repository-chart-test|" "$values"
grep -q "^    repository: $repository-chart-test\$" "$values" || { echo "package-chart.sh: values.yaml has no tests.image.repository line to set" >&2; exit 1; }
grep -q "^  repository: $repository\$" "$values" || { echo "package-chart.sh: values.yaml has no image.repository line to set" >&2; exit 1; }
mkdir -p "$out"
"$helm" package "$tmp/controller-manager" --version "${version#v}" --app-version "$version" --destination "$out"
