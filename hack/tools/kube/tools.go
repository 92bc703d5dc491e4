//go:build tools

// Package tools pins the Kubernetes commands built from source: the local test
// control plane (hack/build-controlplane.sh) and, for the offline kind node
// image, the node components (hack/kind/build-node-image.sh). One module for
// both, so they share the Go build cache.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
