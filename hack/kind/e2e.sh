#!/usr/bin/env bash
# make e2e-kind: the e2e suite against a kind cluster (1 control plane, 2
# workers) running the manager's image, installed with the Helm chart
# (charts/controller-manager) or, with E2E_INSTALL=kustomize, manifests/default.
#
#   1. a Docker engine (hack/kind/docker.sh: installs and starts one if it can),
#      with room for the run once earlier runs' leftovers are pruned;
#   2. the node image: $KIND_NODE_IMAGE if set; else kind's published image
#      for our Kubernetes version if it can be pulled; else one built here
#      without a registry (hack/kind/build-node-image.sh, cached);
#   3. at the same time, the manager's image (make docker-build), the
#      stand-in for the samples' nginx (test/e2e/images/web), one for the
#      NFS CSI driver (test/e2e/images/nfs-stand-in) and the helm test's
#      (make chart-test-image);
#   4. the cluster (bridge CNI by hack/kind/cni.sh on the offline image), the
#      images loaded, the manager installed (E2E_INSTALL: helm, the default,
#      or kustomize), both replicas available; with helm, helm test;
#   5. go test ./test/e2e with E2E_MANAGER=deployment; then, alone, the
#      upgrade test (test/e2e/upgrade_test.go): the chart and image of the
#      commit in hack/kind/upgrade-from (built in stage 3, once per commit),
#      helm upgrade to the current ones and helm rollback (E2E_UPGRADE=0 or
#      E2E_INSTALL=kustomize: no upgrade test); last, with helm, the
#      uninstall and reinstall test (test/e2e/reinstall_test.go): helm
#      uninstall, then helm install under another name into other-system;
#   6. the cluster deleted, unless KEEP_CLUSTER=1 (an existing cluster of the
#      same name is reused).
# KIND_UP=1 (make kind-up, hack/kind/up.sh) stops after stage 4.
# KIND_APISERVER_FEATURE_GATES (e.g. ShardedListAndWatch=true, the server
# path of --shards) is passed to kube-apiserver's --feature-gates when the
# cluster is created (a reused cluster keeps its own).
# Stage times go to $E2E_ARTIFACTS/timings.txt, logs beside it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
KUBE_VERSION=v1.36.3
KIND_CLUSTER="${KIND_CLUSTER:-ndsl-e2e}"
KIND_PUBLISHED_IMAGE="${KIND_PUBLISHED_IMAGE:-kindest/node:$KUBE_VERSION}"
ARTIFACTS="$(mkdir -p "${E2E_ARTIFACTS:-_output/e2e-kind}" && cd "${E2E_ARTIFACTS:-_output/e2e-kind}" && pwd)"
E2E_FLAGS="${E2E_FLAGS:--count=1 -timeout 20m -v}"
VERSION="${VERSION:-v0.1.0-e2e}"
IMG="${IMG:-controller-manager:e2e}"
WEB_IMG=ndsl-e2e/web:v1
# The same web command as a non-root user, for step pods under PodSecurity
# restricted (runAsNonRoot refuses an image without a non-root USER).
WEB_NONROOT_IMG=ndsl-e2e/web:v1-nonroot
NFS_IMG=ndsl-e2e/nfs-stand-in:v1
# The chart's helm test (make chart-test-image), run after the install.
CHART_TEST_IMG=controller-manager-chart-test:e2e
CONTROLPLANE_BIN_DIR="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"
# The earlier version the upgrade test starts from: its image, and its chart
# taken from git into the artifacts.
UPGRADE_FROM=""
if [[ ${E2E_UPGRADE:-1} == 1 && ${E2E_INSTALL:-helm} == helm && ${KIND_UP:-} != 1 ]]; then
  UPGRADE_FROM=$(grep -v '^#' hack/kind/upgrade-from)
  if ! git cat-file -e "$UPGRADE_FROM^{commit}" 2>/dev/null; then
    echo "e2e-kind: hack/kind/upgrade-from names $UPGRADE_FROM, not a commit of this clone (a shallow clone? fetch the history, or E2E_UPGRADE=0)" >&2
    exit 1
  fi
fi
OLD_IMG=controller-manager:upgrade-${UPGRADE_FROM:0:12}
OLD_CHART="$ARTIFACTS/upgrade-from/charts/controller-manager"
KUBECONFIG_FILE="$ARTIFACTS/kubeconfig"
TIMINGS="$ARTIFACTS/timings.txt"
export PATH="$CONTROLPLANE_BIN_DIR/kube-$KUBE_VERSION:$PATH"

: >"$TIMINGS"
begin_all=$SECONDS
log() { echo "[$(date +%T)] e2e-kind: $*" >&2; }
# stage NAME CMD...: runs and times one stage.
stage() {
  local name=$1 s=$SECONDS
  shift
  log "$name ..."
  "$@"
  printf '%-28s %5ds\n' "$name" $((SECONDS - s)) | tee -a "$TIMINGS" >&2
}
k() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# failures prints what each failed test said (its t.Log and t.Error lines,
# klog's lines left out) from the stages' logs, so that the end of make
# e2e-kind's output, all a CI summary may keep, says why.
failures() {
  local f
  for f in "$ARTIFACTS"/*.log; do
    grep -q -- '--- FAIL' "$f" 2>/dev/null || continue
    log "what the failed tests in ${f#"$ARTIFACTS"/} said:"
    awk '/^=== (RUN|CONT|NAME) /{t=$3; next}
         /^--- FAIL: /{print buf[$3]; next}
         /^[IWEF][0-9][0-9][0-9][0-9] /{next}
         t!=""{buf[t]=buf[t] $0 "\n"}' "$f" | tail -60 >&2
  done
}

# apiserver_webhook_lines prints the API server's last lines about webhooks:
# a failed conversion or admission call that no client saw (a watch's
# event, a garbage collector's list) names its error only there.
apiserver_webhook_lines() {
  [[ -n ${KIND:-} ]] || return 0
  log "the API server's last lines about webhooks:"
  docker exec "$KIND_CLUSTER-control-plane" sh -c \
    'grep -h -i -e webhook -e conversion /var/log/pods/kube-system_kube-apiserver-*/kube-apiserver/*.log | tail -20' >&2 || true
}

finish() {
  local rc=$?
  [[ $rc == 0 ]] || { failures; apiserver_webhook_lines; }
  delete_cluster
  printf '%-28s %5ds  (exit %d)\n' "total" $((SECONDS - begin_all)) $rc >>"$TIMINGS"
  log "timings ($TIMINGS):"
  cat "$TIMINGS" >&2
}

delete_cluster() {
  [[ -n ${KIND:-} ]] || return 0
  if [[ ${KEEP_CLUSTER:-} == 1 ]]; then
    log "keeping cluster $KIND_CLUSTER (KUBECONFIG=$KUBECONFIG_FILE); delete it with: $KIND delete cluster --name $KIND_CLUSTER"
    return
  fi
  local s=$SECONDS
  "$KIND" delete cluster --name "$KIND_CLUSTER" >&2 || true
  printf '%-28s %5ds\n' "cluster delete" $((SECONDS - s)) >>"$TIMINGS"
}

trap finish EXIT

# --- 1. Docker, and the kind CLI ------------------------------------------
shim=$(hack/kind/docker.sh)
[[ -z $shim ]] || export PATH="$shim:$PATH"
KIND=$(hack/kind/build-node-image.sh kind)

# --- 1b. disk ----------------------------------------------------------------
# CI clones afresh but keeps Docker's state between runs on one machine:
# prune what earlier runs built and nothing uses, then refuse to go on, in
# one line, when Docker's data root still has too little room. Otherwise the
# run fails halfway, with "no space left on device" from inside a node.
# The figures: docs/testing.md, "Disk".
E2E_MIN_FREE_MIB="${E2E_MIN_FREE_MIB:-5632}"
NODE_IMAGE_BUILD_MIB=3072 # the node image, 1.6 GB, and its component images while it is built
disk() {
  hack/kind/build-node-image.sh prune
  local root avail need=$E2E_MIN_FREE_MIB
  root=$(docker info --format '{{.DockerRootDir}}')
  if [[ -z ${KIND_NODE_IMAGE:-} ]] && ! docker image inspect "$(hack/kind/build-node-image.sh name)" >/dev/null 2>&1; then
    need=$((need + NODE_IMAGE_BUILD_MIB))
  fi
  avail=$(df -Pm "$root" | awk 'NR == 2 {print $4}')
  if ((avail < need)); then
    log "only $avail MiB free under $root, and this run needs about $need MiB: free some space (docker system df shows Docker's share) or lower E2E_MIN_FREE_MIB"
    return 1
  fi
  log "$avail MiB free under $root (needs about $need MiB)"
}
stage "disk" disk

# --- 2 and 3: node image beside the workload images ------------------------
node_image() {
  if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
    docker image inspect "$KIND_NODE_IMAGE" >/dev/null 2>&1 || docker pull "$KIND_NODE_IMAGE"
    echo "$KIND_NODE_IMAGE" >"$ARTIFACTS/node-image"
  elif timeout 600 docker pull "$KIND_PUBLISHED_IMAGE" >/dev/null 2>&1; then
    echo "$KIND_PUBLISHED_IMAGE" >"$ARTIFACTS/node-image"
  else
    log "cannot pull $KIND_PUBLISHED_IMAGE: building the node image here (log: $ARTIFACTS/node-image.log)"
    hack/kind/build-node-image.sh all 2>"$ARTIFACTS/node-image.log" >"$ARTIFACTS/node-image" ||
      { tail -30 "$ARTIFACTS/node-image.log" >&2; return 1; }
  fi
}

# scratch_image TAG DIR [USER]: a one-binary image of the Go command in DIR
# (its own module or this one's), running as USER if given (else root).
scratch_image() {
  local ctx
  ctx=$(mktemp -d)
  (cd "$2" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/cmd" .)
  printf 'FROM scratch\nCOPY cmd /cmd\nENTRYPOINT ["/cmd"]\n' >"$ctx/Dockerfile"
  [[ -z ${3:-} ]] || printf 'USER %s\n' "$3" >>"$ctx/Dockerfile"
  docker build -q --label io.ndsl.build=e2e -t "$1" "$ctx" >/dev/null 2>&1
  rm -rf "$ctx"
}

# release_image: the manager's binary (the one PREBUILT put in _output/image)
# as make release packs it (hack/ociimage), loaded and run by Docker: a
# release's archive must docker load. Here rather than in test/release, which
# make test runs before this script has started a Docker daemon.
release_image() {
  local ref=ndsl-e2e.local/controller-manager:release-check archive=$ARTIFACTS/release-image.oci.tar want got
  go run ./hack/ociimage --ref "$ref" --out "$archive" linux/amd64=_output/image/controller-manager
  docker load -i "$archive"
  want=$(_output/image/controller-manager --version)
  got=$(docker run --rm "$ref" --version)
  docker rmi "$ref" >/dev/null
  rm -f "$archive"
  [[ $got == "$want" ]] || { echo "e2e-kind: docker run of the release archive printed '$got'; want '$want'" >&2; return 1; }
  echo "e2e-kind: the release archive loads and runs: $got"
}

workload_images() {
  # The binary from the host's Go build cache (make test built it), not a
  # compile from scratch inside Docker.
  PREBUILT=1 hack/image/build.sh "$IMG" "${LDFLAGS:--s -w}"
  release_image
  scratch_image "$WEB_IMG" test/e2e/images/web
  scratch_image "$WEB_NONROOT_IMG" test/e2e/images/web 65532:65532
  scratch_image "$NFS_IMG" test/e2e/images/nfs-stand-in
  [[ ${E2E_INSTALL:-helm} != helm ]] || make --no-print-directory chart-test-image CHART_TEST_IMG="$CHART_TEST_IMG"
  [[ -z $UPGRADE_FROM ]] || old_image
}

# old_image: the chart of $UPGRADE_FROM into the artifacts, and its image,
# built once per commit by that commit's own make docker-build from a git
# archive (PREBUILT: the Go build shares this machine's module and build
# caches); images of earlier pins go.
old_image() {
  local s=$SECONDS src ref
  rm -rf "${OLD_CHART%/charts/*}" && mkdir -p "${OLD_CHART%/charts/*}"
  git archive "$UPGRADE_FROM" charts/controller-manager | tar -x -C "${OLD_CHART%/charts/*}"
  if ! docker image inspect "$OLD_IMG" >/dev/null 2>&1; then
    src=$(mktemp -d)
    git archive "$UPGRADE_FROM" | tar -x -C "$src"
    PREBUILT=1 make -C "$src" --no-print-directory docker-build IMG="$OLD_IMG" GIT_COMMIT="$UPGRADE_FROM" \
      VERSION="v0.0.0-$(git rev-list --count "$UPGRADE_FROM")-g${UPGRADE_FROM:0:7}"
    rm -rf "$src"
  fi
  for ref in $(docker image ls --format '{{.Repository}}:{{.Tag}}' controller-manager); do
    [[ $ref != controller-manager:upgrade-* || $ref == "$OLD_IMG" ]] || docker rmi "$ref" >/dev/null
  done
  echo "e2e-kind: upgrade-from image $OLD_IMG and chart in $((SECONDS - s))s"
}

images() {
  local s=$SECONDS w
  workload_images >"$ARTIFACTS/image-build.log" 2>&1 &
  w=$!
  node_image || {
    wait $w || true
    return 1
  }
  printf '%-28s %5ds  %s\n' "  node image" $((SECONDS - s)) "$(cat "$ARTIFACTS/node-image")" >>"$TIMINGS"
  wait $w || {
    tail -30 "$ARTIFACTS/image-build.log" >&2
    return 1
  }
  grep -h "image/build.sh: built\|upgrade-from image\|release archive" "$ARTIFACTS/image-build.log" | sed 's/^/  /' >>"$TIMINGS" || true
}
stage "images (node, manager, web)" images
NODE_IMAGE=$(cat "$ARTIFACTS/node-image")

# --- 4. cluster -------------------------------------------------------------
offline=false
etcd_tag=$(docker image inspect "$NODE_IMAGE" --format '{{index .Config.Labels "io.ndsl.kind.etcd-image-tag"}}')
[[ -z $etcd_tag ]] || offline=true

kind_config() {
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
  - role: worker
networking:
  # The offline node image has no kindnetd: hack/kind/cni.sh instead.
  disableDefaultCNI: $offline
kubeadmConfigPatches:
  # Kubernetes 1.35+ kubelets refuse cgroup v1 hosts unless told otherwise.
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
  # The request load (10 Apps created and deleted a second, each with a
  # Deployment) needs about 50 writes a second from the Deployment
  # controller and the garbage collector, beyond their default 20 QPS each:
  # the backlog then delays the manager's own rollouts by minutes.
  - |
    kind: ClusterConfiguration
    controllerManager:
      extraArgs:
        - name: kube-api-qps
          value: "100"
        - name: kube-api-burst
          value: "200"
EOF
  if $offline; then
    cat <<EOF
  # The offline node image carries the control plane's etcd under this tag.
  - |
    kind: ClusterConfiguration
    etcd:
      local:
        imageTag: $etcd_tag
EOF
  fi
  if [[ -n ${KIND_APISERVER_FEATURE_GATES:-} ]]; then
    # kubeadm v1beta4 (kind for Kubernetes 1.31+): extraArgs is a list.
    cat <<EOF
  - |
    kind: ClusterConfiguration
    apiServer:
      extraArgs:
        - name: feature-gates
          value: $KIND_APISERVER_FEATURE_GATES
EOF
  fi
}

create_cluster() {
  if "$KIND" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
    log "reusing the existing cluster $KIND_CLUSTER"
    "$KIND" get kubeconfig --name "$KIND_CLUSTER" >"$KUBECONFIG_FILE"
    return
  fi
  kind_config >"$ARTIFACTS/kind.yaml"
  local wait=()
  $offline || wait=(--wait 5m)
  # Without a CNI the nodes stay NotReady until cni.sh: no --wait offline.
  "$KIND" create cluster --name "$KIND_CLUSTER" --image "$NODE_IMAGE" --config "$ARTIFACTS/kind.yaml" \
    --kubeconfig "$KUBECONFIG_FILE" "${wait[@]}"
  if $offline; then
    hack/kind/cni.sh "$KUBECONFIG_FILE"
  fi
  k wait --for=condition=Ready node --all --timeout=3m
  k -n kube-system rollout status deployment/coredns --timeout=3m
}

stage "cluster create" create_cluster

deploy() {
  local more=()
  [[ -z $UPGRADE_FROM ]] || more+=("$OLD_IMG")
  [[ ${E2E_INSTALL:-helm} != helm ]] || more+=("$CHART_TEST_IMG")
  "$KIND" load docker-image "$IMG" "${more[@]}" "$WEB_IMG" "$WEB_NONROOT_IMG" "$NFS_IMG" --name "$KIND_CLUSTER"
  # kind has no NFS server: the Pipeline samples' volumes get node-local
  # directories from a stand-in for the NFS CSI driver.
  k apply -f test/e2e/images/nfs-stand-in/deploy.yaml
  k -n kube-system rollout status daemonset/nfs-stand-in --timeout=3m
  case "${E2E_INSTALL:-helm}" in
  helm) helm_install ;;
  kustomize)
    KUBECONFIG="$KUBECONFIG_FILE" make --no-print-directory deploy IMG="$IMG"
    local arg args=""
    for arg in "${DOMAIN_ARGS[@]}"; do
      args+="{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/0/args/-\",\"value\":\"$arg\"},"
    done
    k -n ndsl-system patch deployment controller-manager --type=json -p "[${args%,}]"
    ;;
  *)
    log "E2E_INSTALL must be helm or kustomize, not $E2E_INSTALL"
    return 1
    ;;
  esac
  k -n ndsl-system rollout status deployment/controller-manager --timeout=3m
}

# DOMAIN_ARGS give the Ingresses hosts, as an install that serves them has:
# without one, the App sample (enable_ingress, by the defaulting webhook's
# inversion) and the annotated Service would get no Ingress.
DOMAIN_ARGS=(--app-ingress-domain=apps.e2e.test --ingress-default-domain=ingress.e2e.test)

# The user's values, the same file for every chart version the upgrade
# test installs.
VALUES="$ARTIFACTS/values.yaml"
printf 'extraArgs: [%s]\n' "$(IFS=,; echo "${DOMAIN_ARGS[*]}")" >"$VALUES"
# helm test's image, loaded into the nodes (charts without tests ignore it).
printf 'tests:\n  image: {repository: %s, tag: %s}\n' "${CHART_TEST_IMG%:*}" "${CHART_TEST_IMG##*:}" >>"$VALUES"

# helm_install: the chart into ndsl-system, as the README's helm install
# does, with the e2e image; the namespace enforces PodSecurity restricted
# like manifests/manager/namespace.yaml's.
helm_install() {
  k create namespace ndsl-system --dry-run=client -o yaml | k apply -f -
  k label namespace ndsl-system pod-security.kubernetes.io/enforce=restricted --overwrite
  "$HELM" upgrade --install ndsl charts/controller-manager --kubeconfig "$KUBECONFIG_FILE" --namespace ndsl-system \
    -f "$VALUES" --set image.repository="${IMG%:*}" --set image.tag="${IMG##*:}"
}
[[ ${E2E_INSTALL:-helm} != helm ]] || HELM=$(hack/build-helm.sh)
stage "load images and deploy" deploy
[[ ${KIND_UP:-} != 1 ]] || exit 0

# helm test: the chart's own check (templates/tests: an App created through
# the webhooks, converged by the manager, deleted) on the fresh install.
helm_test() {
  "$HELM" test ndsl --kubeconfig "$KUBECONFIG_FILE" --namespace ndsl-system --logs --timeout 3m 2>&1 |
    tee "$ARTIFACTS/helm-test.log"
}
[[ ${E2E_INSTALL:-helm} != helm ]] || stage "helm test" helm_test

# --- 5. the suite -----------------------------------------------------------
collect() {
  k -n ndsl-system get pods -o wide >"$ARTIFACTS/manager-pods.txt" 2>&1 || true
  for p in $(k -n ndsl-system get pods -o name 2>/dev/null); do
    k -n ndsl-system logs "$p" --all-containers >"$ARTIFACTS/${p#pod/}.log" 2>&1 || true
    k -n ndsl-system logs "$p" --all-containers --previous >"$ARTIFACTS/${p#pod/}.previous.log" 2>/dev/null || true
  done
  k get events -A --sort-by=.lastTimestamp >"$ARTIFACTS/events.txt" 2>&1 || true
}

suite() {
  local rc=0
  # shellcheck disable=SC2086 # E2E_FLAGS are flags, one per word
  KUBECONFIG="$KUBECONFIG_FILE" E2E_USE_EXISTING_CLUSTER=true E2E_MANAGER=deployment \
    E2E_ARTIFACTS="$ARTIFACTS" E2E_WORKLOAD_IMAGE="$WEB_IMG" E2E_NONROOT_WORKLOAD_IMAGE="$WEB_NONROOT_IMG" E2E_NFS_STAND_IN=true \
    go test $E2E_FLAGS ./test/e2e 2>&1 | tee "$ARTIFACTS/suite.log" || rc=$?
  collect
  return $rc
}
stage "suite" suite

# upgrade: the upgrade test, alone and last: it installs the earlier version
# over the current one (the suite's other tests need a fresh install: no
# rollout's Lease handover in the manager's logs).
upgrade() {
  local rc=0
  # shellcheck disable=SC2086 # E2E_FLAGS are flags, one per word
  KUBECONFIG="$KUBECONFIG_FILE" E2E_USE_EXISTING_CLUSTER=true E2E_MANAGER=deployment \
    E2E_ARTIFACTS="$ARTIFACTS" E2E_WORKLOAD_IMAGE="$WEB_IMG" E2E_HELM="$HELM" E2E_HELM_VALUES="$VALUES" \
    E2E_IMAGE="$IMG" E2E_UPGRADE_FROM_CHART="$OLD_CHART" E2E_UPGRADE_FROM_IMAGE="$OLD_IMG" \
    go test $E2E_FLAGS -run '^TestInClusterHelmUpgradeAndRollback$' ./test/e2e 2>&1 | tee "$ARTIFACTS/upgrade.log" || rc=$?
  collect
  return $rc
}
[[ -z $UPGRADE_FROM ]] || stage "upgrade and rollback" upgrade

# reinstall: helm uninstall of ndsl (its pre-delete hook releases the kept
# CRDs), reads and a namespace deletion with no manager, then helm install
# under another release name into other-system, which takes the CRDs over
# (test/e2e/reinstall_test.go). Last: it removes the install the other
# stages test.
reinstall() {
  local rc=0
  # shellcheck disable=SC2086 # E2E_FLAGS are flags, one per word
  KUBECONFIG="$KUBECONFIG_FILE" E2E_USE_EXISTING_CLUSTER=true E2E_MANAGER=deployment \
    E2E_ARTIFACTS="$ARTIFACTS" E2E_WORKLOAD_IMAGE="$WEB_IMG" E2E_NFS_STAND_IN=true E2E_HELM="$HELM" \
    E2E_HELM_VALUES="$VALUES" E2E_IMAGE="$IMG" E2E_REINSTALL=true \
    go test $E2E_FLAGS -run '^TestInClusterHelmUninstallAndReinstallElsewhere$' ./test/e2e 2>&1 | tee "$ARTIFACTS/reinstall.log" || rc=$?
  collect
  return $rc
}
[[ ${E2E_INSTALL:-helm} != helm ]] || stage "uninstall and reinstall" reinstall
