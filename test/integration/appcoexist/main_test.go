// Package appcoexist tests the App controller in a shared cluster: pods of
// other tools in its namespace, scalers writing replicas, and Apps whose
// children an older manager created. kube-controller-manager runs the
// Deployments, ReplicaSets, EndpointSlices and garbage collector; the
// scheduler and kwok's fake kubelets make pods Running and Ready, so that
// Services get ready endpoints.
package appcoexist

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
	// setupErr is why the CRDs or the nodes could not be made; every test
	// fails with it.
	setupErr error
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true},
		func(c *controlplane.ControlPlane) {
			cp = c
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if setupErr = framework.InstallCRDs(ctx, c.Config); setupErr == nil {
				setupErr = c.CreateFakeNodes(ctx, "coexist-a", "coexist-b")
			}
		}))
}
