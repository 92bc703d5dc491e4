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

package controlplane

import (
	"context"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// runMainStartTimeout bounds the startup in RunMain.
const runMainStartTimeout = 3 * time.Minute

// RunMain starts a control plane with opts, hands it to set, runs the tests and
// stops the plane. Its result is the exit code for os.Exit:
//
//	func TestMain(m *testing.M) {
//		os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
//	}
func RunMain(m *testing.M, opts Options, set func(*ControlPlane)) int {
	defer klog.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), runMainStartTimeout)
	cp, err := Start(ctx, opts)
	cancel()
	if err != nil {
		klog.ErrorS(err, "Starting the control plane for the tests")
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane")
		}
	}()
	set(cp)
	return m.Run()
}
