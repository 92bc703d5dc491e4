// Package chart checks the Helm chart (charts/controller-manager): helm lint
// with several value sets; what it renders against manifests/ (the same
// objects, rules and flags), in any namespace, with no caBundle; and
// helm install and upgrade against a real kube-apiserver, where an upgrade
// must leave the caBundles the manager injected alone. helm is built by
// hack/build-helm.sh (make helm).
package chart

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}
