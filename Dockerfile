# Build: make docker-build IMG=registry.example.com/controller-manager:v0.1.0
# The build step is `make build`, the same as on a developer's machine.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.1.0-docker
RUN make build VERSION=${VERSION}

FROM gcr.io/distroless/static:nonroot
COPY --from=build /src/_output/controller-manager /controller-manager
USER 65532:65532
ENTRYPOINT ["/controller-manager"]
