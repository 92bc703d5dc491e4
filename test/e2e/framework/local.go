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

package framework

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// SetupLocal is Setup's local cluster with the caller's control plane
// options (an audit policy, fsync, a kept directory), for suites that need
// more than Setup's defaults. opts must ask for kube-controller-manager,
// kube-scheduler and kwok, which the Cluster relies on.
func SetupLocal(ctx context.Context, opts controlplane.Options) (*Cluster, error) {
	if !opts.ControllerManager || !opts.Scheduler || !opts.Kwok {
		return nil, fmt.Errorf("a local cluster needs kube-controller-manager, kube-scheduler and kwok in its options")
	}
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	if opts.Dir != "" {
		if err := controlplane.RemoveState(opts.Dir); err != nil {
			return nil, err
		}
	}
	begin := time.Now()
	if c.ControlPlane, err = controlplane.Start(ctx, opts); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Local control plane ready", "dir", c.ControlPlane.Dir, "duration", time.Since(begin).Round(time.Millisecond))
	c.Config = c.ControlPlane.Config
	c.KubeconfigPath = c.ControlPlane.KubeconfigPath
	return c.connect(ctx)
}
