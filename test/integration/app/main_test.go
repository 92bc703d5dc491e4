// Package app tests the App controller against a real kube-apiserver with
// kube-controller-manager running, so that the garbage collector deletes an
// App's children with it and the deployment controller fills in the
// Deployments' status. The write-counting tests run in ./writes, on a
// control plane without kube-controller-manager.
package app

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true}, func(c *controlplane.ControlPlane) { cp = c }))
}

var (
	crdsOnce sync.Once
	crdsErr  error
)

// installCRDs installs the CRDs once for all the tests of the package.
func installCRDs(t *testing.T) {
	t.Helper()
	crdsOnce.Do(func() { crdsErr = framework.InstallCRDs(context.Background(), cp.Config) })
	if crdsErr != nil {
		t.Fatalf("installing the CRDs: %v", crdsErr)
	}
}
