#!/usr/bin/env bash
# Builds local stand-ins for the Dockerfile's base images, for machines that
# cannot pull from a registry, and prints the matching --build-arg flags:
#
#   builder  scratch + this machine's Go toolchain, its /bin/sh (with the
#            libraries it loads) for RUN, and CA certificates
#            (stands in for golang:<version>)
#   runtime  scratch + CA certificates + a nonroot (65532) passwd entry
#            (stands in for gcr.io/distroless/static:nonroot)
#
# Tags are keyed by content (Go version; this script), so they are built once
# per machine.
set -euo pipefail

GOROOT="$(go env GOROOT)"
GO_VERSION="$(go env GOVERSION)"
RECIPE="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-10)"
BUILDER_IMAGE="ndsl-local/go-builder:$GO_VERSION-$RECIPE"
RUNTIME_IMAGE="ndsl-local/static-nonroot:$RECIPE"
DOCKER="${DOCKER:-docker}"

CA_BUNDLE=""
for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
  if [[ -s $f ]]; then
    CA_BUNDLE=$f
    break
  fi
done
[[ -n $CA_BUNDLE ]] || { echo "bases.sh: no CA bundle found on this machine" >&2; exit 1; }

have() { $DOCKER image inspect "$1" >/dev/null 2>&1; }

# root_fs DIR: the files both bases share.
root_fs() {
  mkdir -p "$1/etc/ssl/certs" "$1/tmp" "$1/home/nonroot"
  cp "$CA_BUNDLE" "$1/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$1/etc/group"
  printf 'hosts: files dns\n' >"$1/etc/nsswitch.conf"
  chmod 1777 "$1/tmp"
  chown 65532:65532 "$1/home/nonroot"
}

if ! have "$RUNTIME_IMAGE"; then
  ctx=$(mktemp -d)
  root_fs "$ctx/root"
  printf 'FROM scratch\nCOPY root/ /\nUSER 65532:65532\n' >"$ctx/Dockerfile"
  $DOCKER build -q -t "$RUNTIME_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

if ! have "$BUILDER_IMAGE"; then
  ctx=$(mktemp -d)
  root_fs "$ctx/root"
  mkdir -p "$ctx/root/usr/local" "$ctx/root/root" "$ctx/root/bin"
  cp -L /bin/sh "$ctx/root/bin/sh"
  ldd /bin/sh | grep -oE '/[^ ]+' | xargs -r cp --parents -L -t "$ctx/root/"
  # The toolchain without its tests and sources of commands it never builds.
  tar -C "$(dirname "$GOROOT")" --exclude="$(basename "$GOROOT")/test" --exclude="$(basename "$GOROOT")/api" \
    -cf - "$(basename "$GOROOT")" | tar -C "$ctx/root/usr/local" -xf -
  [[ $(basename "$GOROOT") == go ]] || mv "$ctx/root/usr/local/$(basename "$GOROOT")" "$ctx/root/usr/local/go"
  printf 'FROM scratch\nCOPY root/ /\nENV PATH=/usr/local/go/bin:/go/bin GOPATH=/go HOME=/root GOTOOLCHAIN=local\n' >"$ctx/Dockerfile"
  $DOCKER build -q -t "$BUILDER_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

echo "--build-arg BUILDER_IMAGE=$BUILDER_IMAGE --build-arg RUNTIME_IMAGE=$RUNTIME_IMAGE"
