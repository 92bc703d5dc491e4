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

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

var (
	// cp is an API server without ShardedListAndWatch, the client path; the
	// server path starts its own (TestShardedInformers).
	cp *controlplane.ControlPlane
	// crdErr is why the CRDs could not be installed; every test fails with it.
	crdErr error
)

// Informers against the API server alone: no controller runs, so the
// objects the tests create stay as they are.
func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{},
		func(c *controlplane.ControlPlane) {
			cp = c
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			crdErr = framework.InstallCRDs(ctx, c.Config)
		}))
}
