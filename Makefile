# The controller manager's build, test and run entry points.
# Everything here needs only Go: the control plane is built from Go modules.

SHELL := /usr/bin/env bash -o pipefail
ROOT := $(shell pwd)
BIN_DIR ?= $(ROOT)/hack/bin
KUBECTL := $(BIN_DIR)/kube-v1.36.3/kubectl
OUTPUT := $(ROOT)/_output
# The binary of `make build`. Tests that run it get it through
# E2E_MANAGER_BINARY, built before they start: a cold compile must never run
# inside a test's deadline.
MANAGER_BINARY := $(OUTPUT)/controller-manager

# The version from git describe (hack/version.sh): vX.Y.Z on a release tag,
# vX.Y.Z-N-g<sha> after one, v0.0.0-N-g<sha> before the first.
VERSION ?= $(shell hack/version.sh)
# Given without its v (make release VERSION=0.1.0), it gets one: the binary,
# the image tag and the chart's appVersion all say vX.Y.Z.
override VERSION := v$(patsubst v%,%,$(VERSION))
VERSION_PARTS := $(subst ., ,$(patsubst v%,%,$(firstword $(subst -, ,$(VERSION)))))
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(VERSION) \
           -X k8s.io/component-base/version.gitMajor=$(word 1,$(VERSION_PARTS)) \
           -X k8s.io/component-base/version.gitMinor=$(word 2,$(VERSION_PARTS)) \
           -X k8s.io/component-base/version.gitCommit=$(GIT_COMMIT) \
           -X k8s.io/component-base/version.buildDate=$(BUILD_DATE)

# One set of build flags for every Go build and test here, the ones releases
# and images need (static, no local paths): the control plane, helm, the
# tests and make build then share one set of compiled packages, and a cold
# make test compiles k8s.io/api and client-go once, not thrice
# (hack/verify-shared-versions.sh, docs/testing.md).
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(GOFLAGS)

# Integration packages start their own control planes and mostly wait on
# them: four at a time keep two cores busy (docs/testing.md).
TEST_FLAGS ?= -timeout 20m -p 4

.PHONY: all
all: build

.PHONY: build
build: ## Build the controller-manager binary into _output/.
	go build -ldflags "$(LDFLAGS)" -o $(MANAGER_BINARY) ./cmd/controller-manager

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok from Go modules.
	hack/build-controlplane.sh

.PHONY: helm
helm: ## Build the helm CLI from Go modules into hack/bin (the chart's tests, make e2e-kind, make chart-package).
	@hack/build-helm.sh >/dev/null

.PHONY: kustomize
kustomize: ## Build the oldest kustomize users have (v5.0.1; the newest is kubectl's) from Go modules into hack/bin, for the manifests' tests.
	@hack/build-kustomize.sh >/dev/null

.PHONY: chart-package
chart-package: helm ## Package charts/controller-manager into _output/release/: version and appVersion VERSION, image IMG.
	hack/package-chart.sh '$(IMG)' '$(VERSION)' $(OUTPUT)/release

.PHONY: promtool
promtool: ## Build promtool from Go modules, for the alert rules' unit tests (manifests/alerts).
	hack/build-promtool.sh

.PHONY: generate
generate: ## Regenerate clients, listers, informers, apply configurations, CRDs, docs/api-reference.md, docs/flags.md, the controllers' RBAC (from their descriptors), the PrometheusRule (from manifests/alerts) and the chart's copies.
	hack/update-codegen.sh
	hack/boilerplate.sh

.PHONY: verify
verify: ## gofmt, the license header, no binaries or files over 1 MB in git, the tools sharing the control plane's module versions, go vet and generated code (docs/api-reference.md and docs/flags.md included) up to date.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	hack/boilerplate.sh --verify
	hack/verify-tracked-files.sh
	hack/verify-shared-versions.sh
	go vet ./...
	hack/verify-codegen.sh

.PHONY: test-unit
test-unit: promtool ## Unit tests (no control plane; the alert rules' tests run promtool).
	go test $(TEST_FLAGS) $$(go list ./... | grep -v /test/)

.PHONY: test-integration
test-integration: controlplane helm kustomize ## Integration tests against a real etcd and kube-apiserver.
	go test $(TEST_FLAGS) ./test/integration/... ./pkg/testing/...

.PHONY: test-prerequisites
test-prerequisites: controlplane helm kustomize promtool verify build ## What make test builds and checks before its test packages run.

.PHONY: test
test: test-prerequisites ## Everything CI runs: verify, unit (the alert rules' included), integration (helm lint and the chart's tests included), e2e and fault-injection (test/chaos, CI mode) tests.
	@$(MAKE) --no-print-directory test-packages

.PHONY: test-packages
test-packages: ## make test's test packages alone, after make test-prerequisites (.ci/run).
	E2E_MANAGER_BINARY=$(MANAGER_BINARY) go test $(TEST_FLAGS) ./...

.PHONY: run
run: build ## Run the manager: against $KUBECONFIG if set, else against a local control plane started here.
	hack/run.sh

IMG ?= controller-manager:latest
DOCKER ?= docker

.PHONY: docker-build
docker-build: ## Build the container image IMG (needs Docker with BuildKit; builds its own base images when none can be pulled).
	hack/image/build.sh '$(IMG)' '-s -w $(LDFLAGS)'

.PHONY: docker-push
docker-push: ## Push the container image IMG.
	$(DOCKER) push $(IMG)

# The image of the chart's helm test (charts/controller-manager/templates/
# tests, value tests.image): cmd/chart-test on scratch, for GOARCH (the
# host's by default). Builds offline; release it beside IMG, with the same tag.
CHART_TEST_IMG ?= controller-manager-chart-test:latest

.PHONY: chart-test-image
chart-test-image: ## Build the helm test's image CHART_TEST_IMG (cmd/chart-test FROM scratch, for GOARCH); needs no registry.
	@ctx=$$(mktemp -d) && trap 'rm -rf "$$ctx"' EXIT && \
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '-s -w $(LDFLAGS)' -o "$$ctx/chart-test" ./cmd/chart-test && \
	printf 'FROM scratch\nCOPY chart-test /chart-test\nUSER 65532:65532\nENTRYPOINT ["/chart-test"]\n' >"$$ctx/Dockerfile" && \
	$(DOCKER) build -q -t '$(CHART_TEST_IMG)' "$$ctx"

.PHONY: version
version: ## Print the version a build stamps.
	@echo $(VERSION)

# Cluster verbs use the kubectl on PATH, else build kubectl alone.
KUBECTL_CMD = $(or $(shell command -v kubectl 2>/dev/null),$(KUBECTL))

.PHONY: kubectl
kubectl:
	@command -v kubectl >/dev/null 2>&1 || [ -x $(KUBECTL) ] || hack/build-controlplane.sh kubectl

.PHONY: install
install: kubectl ## Install the CRDs into the cluster in $KUBECONFIG.
	$(KUBECTL_CMD) apply -k manifests/crd

.PHONY: uninstall
uninstall: kubectl ## Remove the CRDs (and with them every App and Pipeline) from the cluster in $KUBECONFIG.
	$(KUBECTL_CMD) delete -k manifests/crd --ignore-not-found

.PHONY: deploy
deploy: kubectl ## Apply manifests/default and manifests/pipeline-namespace to the cluster in $KUBECONFIG with image IMG.
	$(KUBECTL_CMD) kustomize manifests/default | sed 's|image: controller-manager:latest|image: $(IMG)|' | $(KUBECTL_CMD) apply -f -
	$(KUBECTL_CMD) apply -k manifests/pipeline-namespace

# kubebuilder's convention: one file that installs what make deploy applies.
DIST ?= $(ROOT)/dist

.PHONY: build-installer
build-installer: kubectl ## Write dist/install.yaml (manifests/default) and dist/install-webhooks.yaml (manifests/default-webhooks, before Kubernetes 1.36), each with image IMG and manifests/pipeline-namespace, for kubectl apply -f.
	mkdir -p $(DIST)
	for k in default:install default-webhooks:install-webhooks; do \
	  $(KUBECTL_CMD) kustomize manifests/$${k%%:*} | sed 's|image: controller-manager:latest|image: $(IMG)|' >$(DIST)/$${k#*:}.yaml && \
	  { echo ---; $(KUBECTL_CMD) kustomize manifests/pipeline-namespace; } >>$(DIST)/$${k#*:}.yaml || exit 1; \
	done

# What a release publishes (docs/install.md), one name everywhere: the image
# RELEASE_IMAGE:vX.Y.Z, the chart oci://ghcr.io/ndsl/charts/controller-manager.
RELEASE_IMAGE ?= ghcr.io/ndsl/controller-manager
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64

.PHONY: release
release: ## make release VERSION=X.Y.Z: into dist/, the image for linux/amd64 and linux/arm64 (an OCI archive), install.yaml and install-webhooks.yaml, the chart, an SPDX SBOM and SHA256SUMS; offline.
	@RELEASE_PLATFORMS='$(RELEASE_PLATFORMS)' hack/release.sh '$(VERSION)' '$(RELEASE_IMAGE)' '$(DIST)' '-s -w $(LDFLAGS)'

# KEEP_CRDS=1 keeps the CRDs, and every App and Pipeline: first
# `controller-manager crds release` leaves them readable without the webhook
# (as the chart's pre-delete hook does), then everything else is deleted.
KEEP_CRDS ?=

.PHONY: undeploy
undeploy: kubectl ## Remove what make deploy applied from the cluster in $KUBECONFIG: CRDs included, or kept with KEEP_CRDS=1.
ifeq ($(KEEP_CRDS),1)
	$(MAKE) build
	$(MANAGER_BINARY) crds release --crd=apps.ingress.example.com --crd=pipelines.distri-infer.ndsl.cn
	$(KUBECTL_CMD) kustomize manifests/default | hack/without-crds.sh | $(KUBECTL_CMD) delete -f - --ignore-not-found
else
	$(KUBECTL_CMD) delete -k manifests/default --ignore-not-found
endif

# The end-to-end suite (test/e2e). `make test` runs it too, through go test ./...
E2E_ARTIFACTS ?= $(OUTPUT)/e2e
E2E_FLAGS ?= -count=1 -timeout 15m -v
KIND_CLUSTER ?= ndsl-e2e
# How make e2e-kind installs the manager: helm (charts/controller-manager) or kustomize (make deploy).
E2E_INSTALL ?= helm

.PHONY: e2e
e2e: build controlplane ## End-to-end suite: local cluster, manifests, two processes of _output/controller-manager; logs in _output/e2e.
	E2E_MANAGER_BINARY=$(MANAGER_BINARY) E2E_ARTIFACTS=$(E2E_ARTIFACTS) go test $(E2E_FLAGS) ./test/e2e

.PHONY: e2e-kind
e2e-kind: kubectl helm ## The e2e suite on a kind cluster (1 control plane, 2 workers) running the image installed by the Helm chart (E2E_INSTALL=kustomize: manifests/default); KEEP_CLUSTER=1 keeps it. Offline, builds the node image.
	KIND_CLUSTER=$(KIND_CLUSTER) E2E_INSTALL=$(E2E_INSTALL) VERSION=$(VERSION) LDFLAGS='-s -w $(LDFLAGS)' E2E_ARTIFACTS=$(OUTPUT)/e2e-kind \
		E2E_FLAGS='$(E2E_FLAGS)' hack/kind/e2e.sh

# The README's quick start: the stages of make e2e-kind up to its suite,
# leaving the cluster (context kind-<name>) for the user. Its own default
# name, so that make e2e-kind, which deletes its cluster, never takes it;
# KIND_CLUSTER given on the command line or in the environment names both.
KIND_UP_CLUSTER ?= $(if $(filter command line environment,$(origin KIND_CLUSTER)),$(KIND_CLUSTER),ndsl)

.PHONY: kind-up
kind-up: kubectl ## A kind cluster (1 control plane, 2 workers) running the manager's image with manifests/default, left running; again: rebuild and redeploy.
	KIND_CLUSTER=$(KIND_UP_CLUSTER) VERSION=$(VERSION) LDFLAGS='-s -w $(LDFLAGS)' E2E_ARTIFACTS=$(OUTPUT)/kind hack/kind/up.sh up

.PHONY: kind-down
kind-down: ## Delete the cluster of make kind-up.
	KIND_CLUSTER=$(KIND_UP_CLUSTER) hack/kind/up.sh down

# The fault-injection suite (test/chaos, issue 12). `make test` runs its CI
# mode through go test ./... (see docs/reliability.md); `make chaos` runs the
# CI mode alone, keeping the logs and the audit log; `make soak` runs the long
# mode. CHAOS_SEED=N replays a schedule;
# see test/chaos/config.go for the other knobs.
CHAOS_ARTIFACTS ?= $(OUTPUT)/chaos
SOAK_DURATION ?= 30m

.PHONY: chaos
chaos: build controlplane ## Fault-injection suite, CI mode, alone; logs and audit log in _output/chaos.
	E2E_MANAGER_BINARY=$(MANAGER_BINARY) CHAOS_ARTIFACTS=$(CHAOS_ARTIFACTS) go test -count=1 -timeout 15m -v -run TestChaos ./test/chaos

.PHONY: soak
soak: build controlplane ## Fault-injection soak (not in CI): SOAK_DURATION of faults on a larger load; figures appended to _output/soak.md (see docs/reliability.md).
	CHAOS_MODE=soak CHAOS_DURATION=$(SOAK_DURATION) E2E_MANAGER_BINARY=$(MANAGER_BINARY) CHAOS_ARTIFACTS=$(OUTPUT)/soak \
		CHAOS_REPORT=$(OUTPUT)/soak.md go test -count=1 -timeout 3h -v -run TestChaos ./test/chaos

# The scale benchmark (test/bench/scale, issue 7); not part of `make test`.
# Built and exec'd rather than go run, which would not pass SIGTERM on.
BENCH_ARGS ?=

.PHONY: bench
bench: build controlplane ## Scale benchmark of _output/controller-manager on a local control plane; table into docs/benchmarks.md. Quick run: BENCH_ARGS="--apps=200 --steady-duration=1m --markdown=".
	go build -o $(OUTPUT)/bench-scale ./test/bench/scale
	@# The controller-runtime peer (scenario peer) is a module of its own: the manager's never depends on controller-runtime.
	cd test/bench/peer && go build -o $(OUTPUT)/bench-peer .
	$(OUTPUT)/bench-scale --binary=$(MANAGER_BINARY) --peer-binary=$(OUTPUT)/bench-peer $(BENCH_ARGS)

.PHONY: help
help:
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
