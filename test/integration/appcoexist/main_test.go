/*
Copyright The NDSL controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

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
