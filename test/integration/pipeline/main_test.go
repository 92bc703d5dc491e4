package pipeline

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

var (
	cp *controlplane.ControlPlane
	// crdErr is why the CRDs could not be installed; every test fails with it.
	crdErr error
)

// The Pipeline controller needs the whole cluster: kube-controller-manager
// binds the volume and claim, runs Deployments and garbage-collects; the
// scheduler and kwok's fake kubelets make the steps' pods Ready.
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true},
		func(c *controlplane.ControlPlane) {
			cp = c
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			crdErr = framework.InstallCRDs(ctx, c.Config)
		}))
}
