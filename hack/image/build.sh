#!/usr/bin/env bash
# Builds the manager's image with the Dockerfile (make docker-build).
#
#   hack/image/build.sh IMG [LDFLAGS]
#   PREBUILT=1 hack/image/build.sh IMG [LDFLAGS]   the binary built here, not in Docker
#
# The Dockerfile needs BuildKit: `docker buildx` where installed, else the
# BuildKit built into a Docker 20.10+ CLI (DOCKER_BUILDKIT=1). Base images:
# $BUILDER_IMAGE / $RUNTIME_IMAGE if set; else the Dockerfile's defaults when
# they are present or can be pulled; else local stand-ins from
# hack/image/bases.sh, so that a machine without a registry builds too.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMG="${1:?usage: build.sh IMG [LDFLAGS]}"
LDFLAGS="${2:-}"
DEFAULT_BUILDER=golang:1.26
DEFAULT_RUNTIME=gcr.io/distroless/static:nonroot

log() { echo "image/build.sh: $*" >&2; }

# docker_cli prints a docker command line that builds with BuildKit.
docker_cli() {
  if docker buildx version >/dev/null 2>&1; then
    echo "docker buildx build --load"
    return
  fi
  # A CLI without buildx still has the classic BuildKit client if it is
  # older than 23 (such as Debian's docker.io); newer ones may sit before it
  # on PATH.
  local dir c v
  local -a dirs
  IFS=: read -ra dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    c=$dir/docker
    [[ -x $c ]] || continue
    v=$("$c" version --format '{{.Client.Version}}' 2>/dev/null || true)
    case $v in
    19.* | 20.* | 22.*)
      echo "env DOCKER_BUILDKIT=1 $c build"
      return
      ;;
    esac
  done
  log "no docker CLI can build with BuildKit: install the buildx plugin (Debian: docker-buildx) or Debian's docker.io"
  return 1
}

# usable IMAGE: present locally, or pulled now.
usable() {
  docker image inspect "$1" >/dev/null 2>&1 && return 0
  timeout 300 docker pull -q "$1" >/dev/null 2>&1
}

cli=$(docker_cli)
args=()
if [[ -n ${BUILDER_IMAGE:-} || -n ${RUNTIME_IMAGE:-} ]]; then
  args+=(--build-arg "BUILDER_IMAGE=${BUILDER_IMAGE:-$DEFAULT_BUILDER}" --build-arg "RUNTIME_IMAGE=${RUNTIME_IMAGE:-$DEFAULT_RUNTIME}")
elif usable "$DEFAULT_BUILDER" && usable "$DEFAULT_RUNTIME"; then
  : # the Dockerfile's defaults
else
  log "cannot pull $DEFAULT_BUILDER and $DEFAULT_RUNTIME: using local stand-ins (hack/image/bases.sh)"
  # shellcheck disable=SC2207 # the script prints flags, one per word
  args+=($("$ROOT/hack/image/bases.sh"))
fi
[[ -z $LDFLAGS ]] || args+=(--build-arg "LDFLAGS=$LDFLAGS")
if [[ ${PREBUILT:-} == 1 ]]; then
  # The Makefile's build flags (no -trimpath), so that the compile reuses
  # make build's cache and only the link runs again.
  log "PREBUILT=1: building the binary on this machine into _output/image/"
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o _output/image/controller-manager ./cmd/controller-manager)
  args+=(--build-arg BINARY=prebuilt)
fi

begin=$SECONDS
# The label lets hack/kind/build-node-image.sh prune find the untagged images
# that rebuilds under one tag leave behind.
# shellcheck disable=SC2086 # $cli is a command line
$cli "${args[@]}" --label io.ndsl.build=controller-manager -t "$IMG" "$ROOT"
size=$(docker image inspect "$IMG" --format '{{.Size}}')
log "built $IMG in $((SECONDS - begin))s, $((size / 1000000)) MB ($size bytes)"
