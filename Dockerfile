# The manager's image: a Go builder stage and a distroless-style nonroot runtime.
#
#   make docker-build IMG=registry.example.com/controller-manager:v0.1.0
#
# Needs BuildKit (the build caches Go modules and compiled packages between
# builds). Both base images are build arguments: on a machine that cannot pull
# them, hack/image/bases.sh builds local stand-ins and `make docker-build`
# uses them. The Makefile passes LDFLAGS (version, commit, date, stripped):
# the build context has no .git.
ARG BUILDER_IMAGE=golang:1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static:nonroot
# BINARY=prebuilt takes a static binary built on the host into
# _output/image/ (hack/image/build.sh with PREBUILT=1, as make e2e-kind does
# to reuse the host's Go build cache) instead of compiling in the build stage.
ARG BINARY=build

# The build stage runs on the build machine's platform and cross-compiles for
# the target's (docker buildx build --platform linux/amd64,linux/arm64), so no
# emulation is needed. make release builds the release's image without Docker.
FROM --platform=${BUILDPLATFORM} ${BUILDER_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath GOMODCACHE=/go/pkg/mod GOCACHE=/root/.cache/go-build
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY pkg/ pkg/
ARG LDFLAGS="-s -w"
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -ldflags "${LDFLAGS}" -o /out/controller-manager ./cmd/controller-manager

FROM scratch AS prebuilt
COPY _output/image/controller-manager /out/controller-manager

FROM ${BINARY} AS binary

FROM ${RUNTIME_IMAGE}
COPY --from=binary /out/controller-manager /controller-manager
# The manifests' Deployment runs it with a read-only root filesystem: it
# writes nothing but its own in-memory certificate.
USER 65532:65532
ENTRYPOINT ["/controller-manager"]
