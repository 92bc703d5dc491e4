#!/usr/bin/env bash
# Pod networking for a kind cluster created with networking.disableDefaultCNI
# (the offline node image has no kindnetd), from the CNI plugins the node
# image carries (Debian's containernetworking-plugins):
#
#   hack/kind/cni.sh KUBECONFIG
#
# Per node: a bridge on the node's spec.podCIDR with host-local addresses
# (portmap for hostPort), a route to every other node's podCIDR via that
# node's address (all nodes share docker's "kind" network, so no
# encapsulation is needed), and masquerade for pod traffic leaving the pod
# network. Pod-to-pod traffic keeps its source address. Run it again after
# a node container restarts (routes and iptables rules do not persist).
set -euo pipefail

KUBECONFIG="${1:?usage: cni.sh KUBECONFIG}"
DOCKER="${DOCKER:-docker}"
k() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }

pod_net=$(k -n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' |
  sed -n 's/^ *podSubnet: *//p' | cut -d, -f1)
pod_net=${pod_net:-10.244.0.0/16}
[[ $pod_net != *:* ]] || { echo "cni.sh: IPv6 pod networks are not handled" >&2; exit 1; }

mapfile -t nodes < <(k get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
declare -A cidr addr
for n in "${nodes[@]}"; do
  # kube-controller-manager assigns podCIDRs shortly after the node registers.
  for _ in $(seq 1 120); do
    cidr[$n]=$(k get node "$n" -o jsonpath='{.spec.podCIDR}')
    [[ -n ${cidr[$n]} ]] && break
    sleep 1
  done
  [[ -n ${cidr[$n]} ]] || { echo "cni.sh: node $n got no spec.podCIDR" >&2; exit 1; }
  addr[$n]=$(k get node "$n" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
done

for n in "${nodes[@]}"; do
  routes=""
  for m in "${nodes[@]}"; do
    [[ $m == "$n" ]] || routes+="ip route replace ${cidr[$m]} via ${addr[$m]}"$'\n'
  done
  conf=$(jq -n --arg subnet "${cidr[$n]}" '{
    cniVersion: "0.4.0", name: "ndsl-kind",
    plugins: [
      {type: "bridge", bridge: "cni0", isGateway: true, ipMasq: false, hairpinMode: true,
       ipam: {type: "host-local", ranges: [[{subnet: $subnet}]], routes: [{dst: "0.0.0.0/0"}], dataDir: "/run/cni-ipam-state"}},
      {type: "portmap", capabilities: {portMappings: true}}
    ]}')
  # The node container's name is the node's name.
  "$DOCKER" exec -i "$n" bash -euo pipefail -c "
    sysctl -qw net.ipv4.ip_forward=1
    # Service replies between pods on one bridge must pass kube-proxy's rules.
    sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
    $routes
    rule='POSTROUTING -s $pod_net ! -d $pod_net -m comment --comment ndsl-kind-masq -j MASQUERADE'
    iptables -t nat -C \$rule 2>/dev/null || iptables -t nat -A \$rule
    mkdir -p /etc/cni/net.d
    cat > /etc/cni/net.d/.10-ndsl-kind.conflist
    mv /etc/cni/net.d/.10-ndsl-kind.conflist /etc/cni/net.d/10-ndsl-kind.conflist
  " <<<"$conf"
  echo "cni.sh: $n: ${cidr[$n]} (${addr[$n]})" >&2
done
