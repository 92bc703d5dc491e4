# The controller manager's build, test and run entry points.
# Everything here needs only Go: the control plane is built from Go modules.

SHELL := /usr/bin/env bash -o pipefail
ROOT := $(shell pwd)
BIN_DIR ?= $(ROOT)/hack/bin
KUBECTL := $(BIN_DIR)/kube-v1.36.3/kubectl
OUTPUT := $(ROOT)/_output

# component-base parses the version as semver: it must start with vX.Y.Z.
BASE_VERSION := v0.1.0
VERSION ?= $(BASE_VERSION)-$(shell git describe --always --dirty 2>/dev/null || echo unknown)
LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
           -X k8s.io/component-base/version.gitMajor=0 -X k8s.io/component-base/version.gitMinor=1 \
           -X k8s.io/component-base/version.gitCommit=$(shell git rev-parse HEAD 2>/dev/null) \
           -X k8s.io/component-base/version.buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)

# Integration packages start their own control planes; keep two at a time.
TEST_FLAGS ?= -timeout 20m -p 2

.PHONY: all
all: build

.PHONY: build
build: ## Build the controller-manager binary into _output/.
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(OUTPUT)/controller-manager ./cmd/controller-manager

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok from Go modules.
	hack/build-controlplane.sh

.PHONY: generate
generate: ## Regenerate clients, listers, informers, apply configurations and CRDs.
	hack/update-codegen.sh

.PHONY: verify
verify: ## gofmt, go vet and generated code up to date.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	hack/verify-codegen.sh

.PHONY: test-unit
test-unit: ## Unit tests (no control plane).
	go test $(TEST_FLAGS) $$(go list ./... | grep -v /test/)

.PHONY: test-integration
test-integration: controlplane ## Integration tests against a real etcd and kube-apiserver.
	go test $(TEST_FLAGS) ./test/integration/... ./pkg/testing/...

.PHONY: test
test: controlplane verify ## Everything CI runs: verify, unit and integration tests.
	go test $(TEST_FLAGS) ./...

.PHONY: run
run: build ## Run the manager: against $KUBECONFIG if set, else against a local control plane started here.
	hack/run.sh

IMG ?= controller-manager:latest

.PHONY: docker-build
docker-build: ## Build the container image IMG (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: deploy
deploy: controlplane ## Apply manifests/default to the cluster in $KUBECONFIG with image IMG.
	cd manifests/default && $(KUBECTL) kustomize . | sed 's|image: controller-manager:latest|image: $(IMG)|' | $(KUBECTL) apply -f -

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
