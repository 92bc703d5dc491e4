// Package framework is the harness of the end-to-end suite in test/e2e: it
// brings up a cluster (the local control plane of pkg/testing/controlplane
// with kube-controller-manager, kube-scheduler and kwok, or an existing one),
// installs manifests/default, and runs the manager binary as separate OS
// processes that authenticate as the manifests' ServiceAccount.
//
// The suite is configured by environment variables (see ConfigFromEnv).
package framework
