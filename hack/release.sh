#!/usr/bin/env bash
# Writes a release's artifacts into DIST (make release VERSION=X.Y.Z), offline:
#
#   hack/release.sh VERSION IMAGE_REPOSITORY DIST LDFLAGS
#
#   controller-manager-vX.Y.Z.oci.tar    the image IMAGE_REPOSITORY:vX.Y.Z for linux/amd64
#                                        and linux/arm64, an OCI image layout archive
#                                        (hack/ociimage; skopeo copy --all pushes it,
#                                        docker load loads linux/amd64)
#   controller-manager-chart-test-vX.Y.Z.oci.tar
#                                        the same for the chart's helm test (cmd/chart-test),
#                                        IMAGE_REPOSITORY-chart-test:vX.Y.Z
#   install.yaml                         make build-installer with that image
#   install-webhooks.yaml                the same for clusters before Kubernetes 1.36
#                                        (App admission by webhooks, not policies)
#   controller-manager-X.Y.Z.tgz         the chart: version X.Y.Z, appVersion and image tag vX.Y.Z
#   controller-manager-vX.Y.Z.spdx.json  SPDX SBOM of the binaries' Go modules (hack/sbom)
#   SHA256SUMS                           of the six above
#
# RELEASE_PLATFORMS (default: linux/amd64 linux/arm64) chooses the image's
# platforms; test/release builds linux/amd64 only.
#
# Timestamps in the image and the SBOM are SOURCE_DATE_EPOCH, else the commit's.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=${1#v} repository=$2 dist=$3 ldflags=$4
# semver.org's grammar, less build metadata: an image tag cannot hold a +.
ident='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
semver="^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-$ident(\.$ident)*)?\$"
if ! [[ $version =~ $semver ]]; then
  echo "release: VERSION=$version is not semver X.Y.Z or X.Y.Z-PRERELEASE (build metadata cannot be an image tag)" >&2
  exit 1
fi
tag=v$version image=$repository:$tag
cd "$ROOT"
commit=$(git rev-parse HEAD)
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
source="https://$(go list -m)"
bin=$ROOT/_output/release/$tag
begin=$SECONDS
log() { echo "release: $*" >&2; }

mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
archive=controller-manager-$tag.oci.tar testArchive=controller-manager-chart-test-$tag.oci.tar chart=controller-manager-$version.tgz sbom=controller-manager-$tag.spdx.json
rm -f "$dist/$archive" "$dist/$testArchive" "$dist/install.yaml" "$dist/install-webhooks.yaml" "$dist/$chart" "$dist/$sbom" "$dist/SHA256SUMS"

read -ra platforms <<<"${RELEASE_PLATFORMS:-linux/amd64 linux/arm64}"
binaries=() testBinaries=()
for p in "${platforms[@]}"; do
  log "building the $p binaries"
  for cmd in controller-manager chart-test; do
    CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath -ldflags "$ldflags" \
      -o "$bin/${p/\//-}/$cmd" ./cmd/$cmd
  done
  binaries+=("$p=$bin/${p/\//-}/controller-manager")
  testBinaries+=("$p=$bin/${p/\//-}/chart-test")
done

ca=()
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  if [[ -s $f ]]; then ca=(--ca-certs "$f"); break; fi
done
log "writing $archive"
go run ./hack/ociimage --ref "$image" --out "$dist/$archive" "${ca[@]}" \
  --source "$source" --revision "$commit" --created "$epoch" "${binaries[@]}"
log "writing $testArchive"
go run ./hack/ociimage --ref "$repository-chart-test:$tag" --name chart-test --out "$dist/$testArchive" \
  --source "$source" --revision "$commit" --created "$epoch" "${testBinaries[@]}"

log "writing install.yaml and install-webhooks.yaml"
# The project's kubectl, whatever kubectl is on PATH: the kustomize in an
# older one renders the bindings' ServiceAccount namespaces wrong (issue 37).
kubectl=${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}/kube-v1.36.3/kubectl
[[ -x $kubectl ]] || hack/build-controlplane.sh kubectl >&2
make --no-print-directory -s build-installer IMG="$image" DIST="$dist" KUBECTL_CMD="$kubectl" >/dev/null

log "writing $chart"
hack/package-chart.sh "$image" "$tag" "$dist" >/dev/null

log "writing $sbom"
go run ./hack/sbom --name "controller-manager-$tag" --main-version "$tag" --created "$epoch" \
  --namespace "$source/releases/download/$tag/$sbom-$commit" "${binaries[@]}" >"$dist/$sbom"

(cd "$dist" && sha256sum "$archive" "$testArchive" install.yaml install-webhooks.yaml "$chart" "$sbom" >SHA256SUMS)
log "$image: $dist in $((SECONDS - begin))s"
