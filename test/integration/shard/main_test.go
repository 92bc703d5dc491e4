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

package shard

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// serverGate turns on server-side sharded list and watch (KEP-5866, alpha
// in Kubernetes 1.36, off by default).
const serverGate = "--feature-gates=ShardedListAndWatch=true"

var (
	// cp is an API server without ShardedListAndWatch: the client path.
	cp *controlplane.ControlPlane
	// gated is an API server with ShardedListAndWatch: the server path.
	gated *controlplane.ControlPlane
	// setupErr is why a control plane or the CRDs are missing; every test
	// fails with it.
	setupErr error
)

// Two API servers, with and without the gate, and no controller: the
// objects the tests create stay as they are.
func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	gated, err = controlplane.Start(ctx, controlplane.Options{APIServerArgs: []string{serverGate}})
	if err != nil {
		klog.ErrorS(err, "Starting the control plane with "+serverGate)
		return 1
	}
	defer func() {
		if err := gated.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane with "+serverGate)
		}
	}()
	return controlplane.RunMain(m, controlplane.Options{},
		func(c *controlplane.ControlPlane) {
			cp = c
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if setupErr = framework.InstallCRDs(ctx, cp.Config); setupErr == nil {
				setupErr = framework.InstallCRDs(ctx, gated.Config)
			}
		})
}

// requireSetup fails t if the control planes or the CRDs are missing.
func requireSetup(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("setting up: %v", setupErr)
	}
}
