// Package app tests the App controller against a real kube-apiserver with
// kube-controller-manager running, so that the garbage collector deletes an
// App's children with it and the deployment controller fills in the
// Deployments' status. The write-counting tests run in ./writes, on a
// control plane without kube-controller-manager.
package app

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true}, func(c *controlplane.ControlPlane) { cp = c }))
}
