// Package queue tests the order in which the controllers' queue serves keys,
// with a real controller against a real kube-apiserver (no
// kube-controller-manager: the Deployments the App controller creates need
// no pods here).
package queue

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}
