#!/usr/bin/env bash
# Builds a kind node image for our Kubernetes version without any container
# registry: every binary comes from Go modules, the node's OS from Debian
# packages (debootstrap). `kind build node-image` cannot do this, it pulls the
# component images. Prints the image name on stdout.
#
#   hack/kind/build-node-image.sh [all|kind|tools|bins|rootfs|base|node|name|prune]
#
# (kind: build only the kind CLI and print its path; name: print the image's
# name without building anything; prune: remove what earlier versions of this
# script built, see prune below.)
#
# Everything is cached outside the clone, keyed by version, so CI (a fresh
# clone on the same machine) builds it once:
#   $KIND_CACHE/bin/<name>-<version>/   kind, kubeadm, kubelet, kube-proxy, coredns, pause
#   docker images ndsl-kind/{rootfs,base,node}:<versions>-<recipe hash>
# The recipe hash covers this script, so changing it rebuilds the images.
#
# The node image has no CNI (kind's kindnetd is not buildable here): clusters
# set networking.disableDefaultCNI and hack/kind/cni.sh sets up bridge CNI.
#
# Deviations from kind's own base image, all from Debian bookworm: containerd,
# runc and the CNI plugins are Debian's; no crictl (its module is refused
# here; kind falls back without it); containerd's restrict_oom_score_adj is on,
# because hosts without CAP_SYS_RESOURCE cannot lower oom_score_adj.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KIND_CACHE="${KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ndsl-kind}"
CONTROLPLANE_BIN_DIR="${CONTROLPLANE_BIN_DIR:-$ROOT/hack/bin}"

KIND_VERSION=v0.33.0
KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16 # what hack/build-controlplane.sh builds; kubeadm is told its tag
COREDNS_VERSION=v1.14.2 # kubeadm v1.36's default
PAUSE_TAGS="3.10.2 3.10" # kubeadm v1.36's, and kind's containerd sandbox_image
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# registry.k8s.io/etcd:<tag>: the tag kind's kubeadm config patch names.
ETCD_TAG=$ETCD_VERSION-local

BIN="$KIND_CACHE/bin"
KIND_BIN="$BIN/kind-$KIND_VERSION/kind"
KUBE_NODE_DIR="$BIN/kube-$KUBE_VERSION"
KUBE_CP_DIR="$CONTROLPLANE_BIN_DIR/kube-$KUBE_VERSION"
ETCD_BIN="$CONTROLPLANE_BIN_DIR/etcd-$ETCD_VERSION/etcd"
COREDNS_BIN="$BIN/coredns-$COREDNS_VERSION/coredns"
LOGS="$KIND_CACHE/logs"
mkdir -p "$BIN" "$LOGS"
export GOWORK=off

log() { echo "[$(date +%T)] build-node-image: $*" >&2; }
timed() {
  local s=$SECONDS
  "$@"
  log "$1: $((SECONDS - s))s"
}
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# install_to DEST CMD...: runs CMD with $out set to a fresh temporary path
# next to DEST, then moves it into place: an interrupted build leaves nothing
# that looks finished.
install_to() {
  local dest=$1
  shift
  [[ -x $dest ]] && return 0
  mkdir -p "$(dirname "$dest")"
  out=$(mktemp "$dest.XXXXXX")
  "$@" || {
    rm -f "$out"
    return 1
  }
  chmod 755 "$out" && mv "$out" "$dest"
}

# --- Go binaries -------------------------------------------------------------

go_kind() { GOBIN=$(dirname "$out") go install "sigs.k8s.io/kind@$KIND_VERSION" && mv "$(dirname "$out")/kind" "$out"; }
build_kind() { CGO_ENABLED=0 install_to "$KIND_BIN" go_kind; }

# The node components are built in the control plane's module with the same
# flags as hack/build-controlplane.sh, so they share its Go build cache.
build_kube_node() {
  local need=() c ldflags="" pkg
  for c in kubeadm kubelet kube-proxy; do
    [[ -x $KUBE_NODE_DIR/$c ]] || need+=("k8s.io/kubernetes/cmd/$c")
  done
  ((${#need[@]} > 0)) || return 0
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
  done
  mkdir -p "$KUBE_NODE_DIR"
  local tmp
  tmp=$(mktemp -d "$KUBE_NODE_DIR/.build.XXXXXX")
  # The control plane's build flags, so that its compiled packages serve.
  (cd "$ROOT/hack/tools/kube" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${need[@]}") || {
    rm -rf "$tmp"
    return 1
  }
  for pkg in "${need[@]}"; do mv "$tmp/${pkg##*/}" "$KUBE_NODE_DIR/"; done
  rm -rf "$tmp"
}

# CoreDNS with only the plugins kubeadm's Corefile uses: a third of the
# compile of the full plugin set. A throwaway module in the cache.
go_coredns() {
  local d="$KIND_CACHE/src/coredns-$COREDNS_VERSION" p
  rm -rf "$d" && mkdir -p "$d"
  {
    printf 'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n'
    for p in cache errors forward health kubernetes loadbalance log loop metrics ready reload; do
      printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$p"
    done
    printf ')\n\nfunc main() { coremain.Run() }\n'
  } >"$d/main.go"
  printf 'module corednsbuild\n\ngo 1.26\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" >"$d/go.mod"
  (cd "$d" && GOFLAGS=-mod=mod go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out" .)
}
build_coredns() { install_to "$COREDNS_BIN" go_coredns; }

# pause: the sandbox's init. Sleeps, reaps children, exits on SIGTERM/SIGINT.
go_pause() {
  local d="$KIND_CACHE/src/pause"
  rm -rf "$d" && mkdir -p "$d"
  printf 'module pause\n\ngo 1.26\n' >"$d/go.mod"
  cat >"$d/main.go" <<'EOF'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			if pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
  (cd "$d" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out" .)
}
build_pause() { install_to "$PAUSE_BIN" go_pause; }

# tools: what does not depend on the Kubernetes build.
tools() {
  timed build_kind
  timed build_pause
  timed build_coredns
}

bins() {
  tools
  [[ -x $KUBE_CP_DIR/kube-apiserver && -x $ETCD_BIN ]] || timed "$ROOT/hack/build-controlplane.sh" >&2
  timed build_kube_node
}

# --- Debian root filesystem ------------------------------------------------

rootfs() {
  have_image "$ROOTFS_IMAGE" && return 0
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >&2
  local r="$KIND_CACHE/rootfs-${ROOTFS_IMAGE##*:}"
  if [[ ! -f $r/.complete ]]; then
    rm -rf "$r"
    debootstrap --variant=minbase \
      --include=systemd,dbus,containerd,runc,containernetworking-plugins,iptables,nftables,iproute2,conntrack,ebtables,ethtool,socat,util-linux,mount,kmod,libseccomp2,pigz,ca-certificates,procps,jq \
      "$DEBIAN_SUITE" "$r" "$DEBIAN_MIRROR" >"$LOGS/debootstrap.log" 2>&1 ||
      {
        log "debootstrap failed, see $LOGS/debootstrap.log"
        return 1
      }
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
    touch "$r/.complete"
  fi
  tar -C "$r" --exclude=./.complete -c . | docker import - "$ROOTFS_IMAGE" >/dev/null
  rm -rf "$r"
}

# --- kind's base image: kind's node files on the Debian rootfs -------------

base() {
  have_image "$BASE_IMAGE" && return 0
  local kind_dir ctx
  kind_dir=$(cd "$KIND_CACHE" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)
  ctx=$(mktemp -d)
  cp -r "$kind_dir/images/base/files" "$ctx/files"
  chmod -R u+w "$ctx"
  # kind's images/base/Dockerfile, minus the source builds.
  cat >"$ctx/Dockerfile" <<EOF
FROM $ROOTFS_IMAGE
COPY files/usr/local/bin/ /usr/local/bin/
COPY files/kind/ /kind/
COPY files/etc/ /etc/
RUN chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* \\
 && chmod -R go-w /etc/systemd /etc/containerd /etc/default /etc/sysctl.d \\
 && rm -f /lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service \\
          /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
          /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
          /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo ReadKMsg=no >> /etc/systemd/journald.conf \\
 && ln -sf /usr/lib/systemd/systemd /sbin/init \\
 && ln -sf /usr/bin/containerd /usr/local/bin/containerd \\
 && mkdir -p /opt/cni/bin /etc/kubernetes/manifests \\
 && cp /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback /usr/lib/cni/portmap /usr/lib/cni/ptp /opt/cni/bin/ \\
 && ctr oci spec | jq '.hooks.createContainer += [{"path": "/kind/bin/mount-product-files.sh"}] | del(.process.rlimits)' > /etc/containerd/cri-base.json \\
 && sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml \\
 && grep -q 'restrict_oom_score_adj = true' /etc/containerd/config.toml \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
 && systemctl mask systemd-binfmt.service
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
EOF
  docker build -q -t "$BASE_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# --- component images, tagged as kubeadm and kind expect -------------------

# image TAG FROM BINARY PATH: a one-binary image.
image() {
  local ctx
  ctx=$(mktemp -d)
  cp "$3" "$ctx/bin"
  # kubeadm's static pods name the command, not its path: PATH must find it.
  printf 'FROM %s\nCOPY bin %s\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nENTRYPOINT ["%s"]\n' "$2" "$4" "$4" >"$ctx/Dockerfile"
  docker build -q --label "$BUILD_LABEL=kind-component" -t "$1" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# glibc_image TAG BINARY...: scratch plus the shared libraries the binaries
# load (etcd's build uses cgo; a static binary, such as the Kubernetes ones,
# needs none).
glibc_image() {
  local tag=$1 ctx b libs
  shift
  ctx=$(mktemp -d)
  mkdir -p "$ctx/root/etc" "$ctx/root/tmp"
  for b in "$@"; do
    libs=$(ldd "$b" 2>/dev/null | grep -oE '/[^ ]+' || true)
    [[ -z $libs ]] || xargs cp --parents -L -t "$ctx/root/" <<<"$libs"
  done
  printf 'root:x:0:0:root:/:/sbin/nologin\n' >"$ctx/root/etc/passwd"
  printf 'root:x:0:\n' >"$ctx/root/etc/group"
  printf 'hosts: files dns\n' >"$ctx/root/etc/nsswitch.conf"
  chmod 1777 "$ctx/root/tmp"
  printf 'FROM scratch\nCOPY root/ /\n' >"$ctx/Dockerfile"
  docker build -q --label "$BUILD_LABEL=kind-component" -t "$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
}

component_images() {
  local glibc=ndsl-kind/glibc:${NODE_IMAGE##*:} c
  glibc_image "$glibc" "$KUBE_CP_DIR/kube-apiserver" "$ETCD_BIN"
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    image "registry.k8s.io/$c:$KUBE_VERSION" "$glibc" "$KUBE_CP_DIR/$c" "/usr/local/bin/$c"
  done
  # kube-proxy runs iptables: it gets the Debian rootfs.
  image "registry.k8s.io/kube-proxy:$KUBE_VERSION" "$ROOTFS_IMAGE" "$KUBE_NODE_DIR/kube-proxy" /usr/local/bin/kube-proxy
  image "registry.k8s.io/etcd:$ETCD_TAG" "$glibc" "$ETCD_BIN" /usr/local/bin/etcd
  image "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" scratch "$COREDNS_BIN" /coredns
  local first=${PAUSE_TAGS%% *} t
  image "registry.k8s.io/pause:$first" scratch "$PAUSE_BIN" /pause
  for t in ${PAUSE_TAGS#* }; do docker tag "registry.k8s.io/pause:$first" "registry.k8s.io/pause:$t"; done
}

# drop_components removes the component images' tags: they only carry the
# binaries into the node image, which holds its own copy (1 GB on a disk that
# keeps Docker's state), and every node build makes them afresh.
drop_components() {
  # shellcheck disable=SC2046 # one image per word
  docker rmi $(component_list) >/dev/null 2>&1 || true
}

component_list() {
  local t
  echo "registry.k8s.io/kube-apiserver:$KUBE_VERSION registry.k8s.io/kube-controller-manager:$KUBE_VERSION"
  echo "registry.k8s.io/kube-scheduler:$KUBE_VERSION registry.k8s.io/kube-proxy:$KUBE_VERSION"
  echo "registry.k8s.io/etcd:$ETCD_TAG registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
  for t in $PAUSE_TAGS; do echo "registry.k8s.io/pause:$t"; done
}

# --- the node image: what `kind build node-image` does, without pulls -------

node() {
  have_image "$NODE_IMAGE" && return 0
  # debootstrap mostly downloads and unpacks while the Go builds use the
  # CPUs: side by side they take 20-25 min cold instead of 30-38 (2 cores).
  timed rootfs &
  local rootfs_pid=$!
  # shellcheck disable=SC2064 # expand the pid now
  trap "kill $rootfs_pid 2>/dev/null || true" EXIT
  bins
  wait "$rootfs_pid" || {
    log "building the Debian root filesystem failed"
    return 1
  }
  base
  drop_components # an earlier build's, unlabelled: prune would miss them
  component_images
  local cid b
  cid=$(docker run -d --entrypoint=sleep "$BASE_IMAGE" infinity)
  # shellcheck disable=SC2064 # expand cid now
  trap "docker rm -f -v $cid >/dev/null 2>&1 || true" RETURN
  for b in kubeadm kubelet; do docker cp "$KUBE_NODE_DIR/$b" "$cid:/usr/bin/$b"; done
  docker cp "$KUBE_CP_DIR/kubectl" "$cid:/usr/bin/kubectl"
  docker exec "$cid" sh -ec "chown root:root /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl
    printf %s $KUBE_VERSION > /kind/version
    mkdir -p /kind/manifests"
  # kind imports images into containerd's k8s.io namespace and pins them.
  docker exec "$cid" sh -c 'containerd >/tmp/containerd.log 2>&1 &
    for i in $(seq 1 60); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.5; done; exit 1'
  # shellcheck disable=SC2046 # one image per word
  docker save $(component_list) | docker exec -i "$cid" ctr -n k8s.io images import --no-unpack --digests - >/dev/null
  for b in $(component_list); do
    docker exec "$cid" ctr -n k8s.io images label "$b" io.cri-containerd.pinned=pinned >/dev/null
  done
  docker exec "$cid" sh -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2; done; rm -rf /tmp/* /run/containerd'
  # The label tells hack/kind/e2e.sh which etcd tag to give kubeadm.
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change "LABEL io.ndsl.kind.etcd-image-tag=$ETCD_TAG" --change "LABEL $BUILD_LABEL=kind-node" \
    "$cid" "$NODE_IMAGE" >/dev/null
  drop_components
}

# prune removes what earlier versions of this script (and of the project's
# other image builds) left behind: the ndsl-kind images of other recipes or
# versions, and untagged images with the build label, which a rebuild under
# the same tag leaves. CI clones afresh but keeps Docker's state between runs
# on one machine, where these would pile up. An image a container still uses
# stays: docker rmi without -f refuses it.
prune() {
  local keep=" $NODE_IMAGE $BASE_IMAGE $ROOTFS_IMAGE ndsl-kind/glibc:${NODE_IMAGE##*:} " ref
  for ref in $(docker image ls --format '{{.Repository}}:{{.Tag}}' --filter 'reference=ndsl-kind/*'); do
    [[ $keep == *" $ref "* ]] && continue
    if docker rmi "$ref" >/dev/null 2>&1; then log "prune: removed $ref"; else log "prune: kept $ref, in use"; fi
  done
  docker image prune -f --filter "label=$BUILD_LABEL" >/dev/null
  # Untagged images from before the label, known by their entrypoints: the
  # manager's, the e2e stand-ins' and the component images'.
  local id ep
  for id in $(docker image ls -q --filter dangling=true); do
    ep=$(docker image inspect --format '{{join .Config.Entrypoint " "}}' "$id" 2>/dev/null) || continue
    case " $UNLABELLED_ENTRYPOINTS " in
    *" $ep "*) docker rmi "$id" >/dev/null 2>&1 || true ;;
    esac
  done
}

# Cache keys: each stage's recipe (its function's text) and what it builds on,
# so editing one stage rebuilds only what follows from it.
key() { { echo "$@"; for f in "$@"; do declare -f "$f"; done; } | sha256sum | cut -c1-10; }
ROOTFS_IMAGE=ndsl-kind/rootfs:$DEBIAN_SUITE-$(key rootfs)
BASE_IMAGE=ndsl-kind/base:$KIND_VERSION-$(key rootfs base)
PAUSE_BIN="$BIN/pause-$(key go_pause)/pause"
NODE_IMAGE=ndsl-kind/node:$KUBE_VERSION-$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-10)
# On every image the project builds (hack/image/build.sh's too): prune finds
# the untagged ones by it.
BUILD_LABEL=io.ndsl.build
UNLABELLED_ENTRYPOINTS="/controller-manager /cmd /coredns /pause $(printf '/usr/local/bin/%s ' kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd)"

case "${1:-all}" in
kind)
  build_kind >&2
  echo "$KIND_BIN"
  exit 0
  ;;
tools) tools ;;
bins) bins ;;
rootfs) timed rootfs ;;
base) timed base ;;
all | node) timed node ;;
name) ;;
prune)
  prune
  exit 0
  ;;
*)
  echo "usage: $0 [all|kind|tools|bins|rootfs|base|node|name|prune]" >&2
  exit 2
  ;;
esac
echo "$NODE_IMAGE"
