#!/usr/bin/env bash
# The README's install, upgrade and uninstall commands, run as written on a
# kind cluster from the artifacts make release produces, offline. Not part of
# CI (docs/testing.md, "The release, as a user installs it"):
#
#   hack/kind/release-check.sh
#
#   1. make release for RELEASE_CHECK_FROM (0.2.0) and RELEASE_CHECK_TO
#      (0.2.1), both from this tree, each into its own dist directory;
#   2. a local OCI registry on the host (hack/tools/registry:
#      go-containerregistry's, built from Go modules) on RELEASE_CHECK_PORT
#      (5055) of localhost and of Docker's bridge gateway, holding both
#      releases' images under ndsl/, their charts under ndsl/charts, and the
#      web stand-in (test/e2e/images/web) as library/nginx:latest for the
#      App sample's nginx:latest;
#   3. a kind cluster "release-check" whose containerd pulls ghcr.io and
#      docker.io through that registry (a mirror over http), so that the
#      chart's and install.yaml's image names pull as written;
#   4. the README's fenced sh blocks, taken from README.md at run time, with
#      only these substitutions: oci://ghcr.io/ndsl/charts/controller-manager
#      -> oci://localhost:PORT/ndsl/charts/controller-manager --plain-http,
#      install.yaml's release URL -> the local dist file, X.Y.Z -> the
#      version. Pass 1 (Helm): "Install with Helm", "A first App", "A first
#      Pipeline", "Upgrade" to the second version, "Uninstall". Pass 2
#      (kubectl): "Install with kustomize" at the first version, again at the
#      second (the README's upgrade for install.yaml), "A first App", and
#      the Uninstall section's install.yaml block. Each step's result is
#      checked: rollouts, the image each version runs, helm test, the App
#      Ready, the webhook case refused, nothing of the manager left;
#   5. the cluster deleted, the registry stopped (KEEP_CLUSTER=1 keeps both).
#
# Logs, the commands as run and stage times: _output/release-check/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
FROM=${RELEASE_CHECK_FROM:-0.2.0}
TO=${RELEASE_CHECK_TO:-0.2.1}
PORT=${RELEASE_CHECK_PORT:-5055}
KIND_CLUSTER=release-check
KUBE_VERSION=v1.36.3
KIND_CACHE="${KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ndsl-kind}"
OUT="$ROOT/_output/release-check"
WORK="$OUT/work" # the user's directory: my-values.yaml goes here
NGINX_STAND_IN=ndsl-release-check/nginx-stand-in:v1
TIMINGS="$OUT/timings.txt"
export KUBECONFIG="$OUT/kubeconfig"
export PATH="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}/kube-$KUBE_VERSION:$PATH"

rm -rf "$OUT" && mkdir -p "$WORK"
# The README's App sample path, as in a checkout.
ln -s "$ROOT/manifests" "$WORK/manifests"
: >"$TIMINGS"
begin_all=$SECONDS
log() { echo "[$(date +%T)] release-check: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }
stage() {
  local name=$1 s=$SECONDS
  shift
  log "$name ..."
  "$@"
  printf '%-40s %5ds\n' "$name" $((SECONDS - s)) | tee -a "$TIMINGS" >&2
}

registry_pid=""
finish() {
  local rc=$?
  if [[ ${KEEP_CLUSTER:-} == 1 ]]; then
    log "keeping cluster $KIND_CLUSTER (KUBECONFIG=$KUBECONFIG) and the registry (pid $registry_pid, port $PORT)"
  else
    [[ -z ${KIND:-} ]] || "$KIND" delete cluster --name "$KIND_CLUSTER" >&2 || true
    [[ -z $registry_pid ]] || kill "$registry_pid" 2>/dev/null || true
    docker rmi "$NGINX_STAND_IN" >/dev/null 2>&1 || true
  fi
  printf '%-40s %5ds  (exit %d)\n' total $((SECONDS - begin_all)) "$rc" >>"$TIMINGS"
  cat "$TIMINGS" >&2
}
trap finish EXIT

# --- 1. the releases, and the tools --------------------------------------
shim=$(hack/kind/docker.sh)
[[ -z $shim ]] || export PATH="$shim:$PATH"
HELM=$(hack/build-helm.sh 2>/dev/null)
export PATH="$(dirname "$HELM"):$PATH"
releases() {
  local v
  for v in "$FROM" "$TO"; do
    make --no-print-directory release VERSION="$v" DIST="$OUT/dist-$v" >"$OUT/release-$v.log" 2>&1 ||
      { tail -20 "$OUT/release-$v.log" >&2; die "make release VERSION=$v"; }
    (cd "$OUT/dist-$v" && sha256sum --quiet -c SHA256SUMS) || die "dist-$v: SHA256SUMS does not match"
  done
}
stage "make release $FROM and $TO" releases

# --- 2. the registry -----------------------------------------------------
# The host as kind's node containers reach it: Docker's default bridge gateway.
HOST=$(docker network inspect bridge -f '{{(index .IPAM.Config 0).Gateway}}')
registry() {
  local name
  (cd hack/tools/registry && GOWORK=off go build -o "$OUT/registry" .)
  if curl -s -o /dev/null "http://localhost:$PORT/"; then
    die "port $PORT is taken: set RELEASE_CHECK_PORT to a free one"
  fi
  "$OUT/registry" "127.0.0.1:$PORT" "$HOST:$PORT" >"$OUT/registry.log" 2>&1 &
  registry_pid=$!
  local i
  for i in $(seq 1 50); do
    curl -sf "http://localhost:$PORT/v2/" >/dev/null && break
    kill -0 "$registry_pid" || die "the registry exited: $(tail -3 "$OUT/registry.log")"
    sleep 0.2
  done
  curl -sf "http://localhost:$PORT/v2/" >/dev/null || die "the registry did not answer on port $PORT"

  local v
  for v in "$FROM" "$TO"; do
    for name in controller-manager controller-manager-chart-test; do
      skopeo copy -q --all --dest-tls-verify=false "oci-archive:$OUT/dist-$v/$name-v$v.oci.tar" \
        "docker://localhost:$PORT/ndsl/$name:v$v" >&2
    done
    "$HELM" push "$OUT/dist-$v/controller-manager-$v.tgz" "oci://localhost:$PORT/ndsl/charts" --plain-http >&2
  done
  # The App sample runs nginx:latest: the e2e web stand-in (serves port 80)
  # under that name, since Docker Hub cannot be reached.
  local ctx
  ctx=$(mktemp -d)
  (cd test/e2e/images/web && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/cmd" .)
  printf 'FROM scratch\nCOPY cmd /cmd\nENTRYPOINT ["/cmd"]\n' >"$ctx/Dockerfile"
  docker build -q --label io.ndsl.build=release-check -t "$NGINX_STAND_IN" "$ctx" >/dev/null
  rm -rf "$ctx"
  skopeo copy -q --dest-tls-verify=false "docker-daemon:$NGINX_STAND_IN" "docker://localhost:$PORT/library/nginx:latest" >&2
  curl -sf "http://localhost:$PORT/v2/_catalog" >&2
  echo >&2
}
stage "registry, images and charts pushed" registry

# --- 3. the cluster --------------------------------------------------------
KIND=$(hack/kind/build-node-image.sh kind)
NODE_IMAGE=$(hack/kind/build-node-image.sh name)
docker image inspect "$NODE_IMAGE" >/dev/null 2>&1 || NODE_IMAGE=$(hack/kind/build-node-image.sh all)
cluster() {
  local etcd_tag
  etcd_tag=$(docker image inspect "$NODE_IMAGE" --format '{{index .Config.Labels "io.ndsl.kind.etcd-image-tag"}}')
  [[ -n $etcd_tag ]] || die "$NODE_IMAGE is not the offline node image (no etcd tag label)"
  "$KIND" delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
  # As hack/kind/e2e.sh's offline cluster, plus the registry mirrors.
  cat >"$OUT/kind.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
  - role: worker
networking:
  disableDefaultCNI: true
kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
  - |
    kind: ClusterConfiguration
    etcd:
      local:
        imageTag: $etcd_tag
containerdConfigPatches:
  - |-
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."ghcr.io"]
      endpoint = ["http://$HOST:$PORT"]
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
      endpoint = ["http://$HOST:$PORT"]
EOF
  "$KIND" create cluster --name "$KIND_CLUSTER" --image "$NODE_IMAGE" --config "$OUT/kind.yaml" --kubeconfig "$KUBECONFIG"
  hack/kind/cni.sh "$KUBECONFIG"
  kubectl wait --for=condition=Ready node --all --timeout=3m
  kubectl -n kube-system rollout status deployment/coredns --timeout=3m
  # The node image has no curl.
  docker exec "$KIND_CLUSTER-worker" bash -c "exec 3<>/dev/tcp/$HOST/$PORT && printf 'GET /v2/ HTTP/1.0\r\n\r\n' >&3 && head -1 <&3" | grep -q ' 200 ' ||
    die "the nodes cannot reach the registry at http://$HOST:$PORT"
}
stage "cluster create" cluster

# --- 4. the README's commands ----------------------------------------------
# readme_block SECTION N: the Nth ```sh block under "## SECTION".
readme_block() {
  awk -v want="## $1" -v n="$2" '
    /^## / { in_section = ($0 == want); next }
    in_section && /^```sh$/ { count++; if (count == n) { on = 1 }; next }
    on && /^```$/ { exit }
    on { print }' README.md
}
# run_block VERSION SECTION N [expect-fail]: the block, substituted, run in
# the user's directory; its commands and output go to the log.
run_block() {
  local v=$1 section=$2 n=$3 cmds rc=0
  cmds=$(readme_block "$section" "$n" | sed \
    -e "s|https://github.com/ndsl/controller-manager/releases/download/vX.Y.Z/install.yaml|$OUT/dist-$v/install.yaml|g" \
    -e "s|oci://ghcr.io/ndsl/charts/controller-manager|oci://localhost:$PORT/ndsl/charts/controller-manager --plain-http|g" \
    -e "s|X\.Y\.Z|$v|g")
  [[ -n $cmds ]] || die "README.md has no sh block $n under \"## $section\""
  ! grep -q 'ghcr.io\|github.com' <<<"$cmds" || die "README \"$section\" block $n names a registry or URL this check does not substitute"
  printf '\n### README "%s", block %s, version %s\n%s\n' "$section" "$n" "$v" "$cmds" >>"$OUT/commands.sh"
  log "README \"$section\" ($v):"
  (cd "$WORK" && bash -euo pipefail -x -c "$cmds") >"$OUT/step.log" 2>&1 || rc=$?
  sed 's/^/    /' "$OUT/step.log" >&2
  cat "$OUT/step.log" >>"$OUT/commands.log"
  if [[ ${4:-} == expect-fail ]]; then
    ((rc != 0)) || die "README \"$section\" block $n succeeded; the README says it is refused"
  else
    ((rc == 0)) || die "README \"$section\" block $n exited $rc"
  fi
}

# check_image VERSION: the manager rolled out, every pod of it runs the
# release's image, pulled as written through the mirror (its digest is the
# one the registry serves for that tag).
check_image() {
  local want="ghcr.io/ndsl/controller-manager:v$1" got digest
  kubectl -n ndsl-system rollout status deployment/controller-manager --timeout=3m >&2
  got=$(kubectl -n ndsl-system get deployment controller-manager -o jsonpath='{.spec.template.spec.containers[0].image}')
  [[ $got == "$want" ]] || die "the manager runs $got, not $want"
  digest=$(curl -sfI -H 'Accept: application/vnd.oci.image.index.v1+json' \
    "http://localhost:$PORT/v2/ndsl/controller-manager/manifests/v$1" | tr -d '\r' | sed -n 's/^Docker-Content-Digest: //ip')
  # Pods of the old ReplicaSet may still be terminating.
  got=$(kubectl -n ndsl-system get pods -l app.kubernetes.io/component=controller-manager -o go-template \
    --template '{{range .items}}{{if not .metadata.deletionTimestamp}}{{(index .status.containerStatuses 0).imageID}}{{"\n"}}{{end}}{{end}}' | sort -u)
  [[ $got == "ghcr.io/ndsl/controller-manager@$digest" ]] || die "the manager's pods run $got, not v$1 ($digest)"
  log "the manager runs $want: $got"
}
# check_app [no-domain]: the sample App Ready; with no-domain (install.yaml
# sets no --app-ingress-domain) its 3 replicas ready and Ready=False for
# IngressHostRequired, as the README's "A first App" says.
check_app() {
  if [[ ${1:-} == no-domain ]]; then
    kubectl -n demo wait --for=jsonpath='{.status.readyReplicas}'=3 apps.ingress.example.com/app-sample --timeout=3m >&2 &&
      [[ $(kubectl -n demo get apps.ingress.example.com app-sample -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}') == IngressHostRequired ]] ||
      { kubectl -n demo describe apps.ingress.example.com app-sample >&2; die "App app-sample: not 3 ready replicas and Ready=False IngressHostRequired"; }
  else
    kubectl -n demo wait --for=condition=Ready apps.ingress.example.com/app-sample --timeout=3m >&2 ||
      { kubectl -n demo describe apps.ingress.example.com app-sample >&2; die "App app-sample is not Ready"; }
  fi
  kubectl -n demo get apps.ingress.example.com app-sample \
    -o jsonpath='{range .status.conditions[*]}{.type}={.status} ({.reason}){"\n"}{end}' >&2
}
check_refused() {
  grep -q 'enable_ingress requires enable_service to be true' "$OUT/step.log" ||
    die "the webhook case was refused, but not with the README's message"
}
check_gone() {
  local left
  kubectl wait --for=delete namespace/ndsl-system namespace/pipeline --timeout=3m >&2 2>/dev/null || true
  left=$(kubectl get namespaces,crds,clusterroles,clusterrolebindings,validatingwebhookconfigurations,mutatingwebhookconfigurations \
    -o name | grep -E 'ndsl|ingress.example.com|distri-infer|^namespace/pipeline$' || true)
  [[ -z $left ]] || die "left after the uninstall: $(echo $left)"
}

helm_pass() {
  run_block "$FROM" "Install with Helm" 1
  check_image "$FROM"
  run_block "$FROM" "A first App" 1
  check_app
  run_block "$FROM" "A first App" 2 expect-fail
  check_refused
  run_block "$FROM" "A first Pipeline" 1
  run_block "$TO" "Upgrade" 1
  check_image "$TO"
  check_app
  "$HELM" test ndsl -n ndsl-system --timeout 3m >&2
  run_block "$TO" "Uninstall" 1
  check_gone
}
stage "pass 1: Helm $FROM, upgrade to $TO" helm_pass

kubectl_pass() {
  kubectl delete namespace demo --wait --timeout=3m >&2
  run_block "$FROM" "Install with kustomize" 1
  check_image "$FROM"
  run_block "$TO" "Install with kustomize" 1
  check_image "$TO"
  run_block "$TO" "A first App" 1
  check_app no-domain
  run_block "$TO" "Uninstall" 2
  check_gone
}
stage "pass 2: install.yaml $FROM, then $TO" kubectl_pass
log "the README's commands as run: $OUT/commands.sh; their output: $OUT/commands.log"
