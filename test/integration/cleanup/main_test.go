package cleanup

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

var cp *controlplane.ControlPlane

// The garbage collector of kube-controller-manager orphans children when
// their owner is deleted with propagation policy Orphan.
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true}, func(c *controlplane.ControlPlane) { cp = c }))
}

var crdsOnce sync.Once

// installCRDs installs the CRDs once: the sweeper watches Apps and Pipelines
// as owners, and its caches sync only when those kinds are served.
func installCRDs(t *testing.T) {
	t.Helper()
	var err error
	crdsOnce.Do(func() { err = framework.InstallCRDs(context.Background(), cp.Config) })
	if err != nil {
		t.Fatal(err)
	}
}
