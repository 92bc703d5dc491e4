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

package ha

import (
	"context"
	"sync"

	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/membership"
)

// joinMembers announces this replica to the others of its group and layout
// and follows them, until ctx is done; leave (deferred by the caller) waits
// for that and deletes the member Lease, so that the others take this
// replica's units as soon as it releases them.
//
// A replica offers each whole controller once that controller's own caches
// have synced (Controllers.SetMembers), so that one handed to it runs at
// once, as a warm standby's does, and one whose caches cannot sync (its CRD
// or its RBAC rule missing) keeps only itself from being led here. A shard
// unit is offered at once: it builds its caches once assigned here.
func joinMembers(ctx context.Context, cfg Config, el *election, us []Unit) (*membership.Members, func()) {
	le := cfg.LeaderElection
	var cold []string
	for _, u := range us {
		if u.Shard != nil {
			cold = append(cold, u.Name)
		}
	}
	members := membership.New(membership.Config{
		Client:        el.client,
		Namespace:     el.namespace,
		Group:         le.ResourceName,
		Identity:      el.identity,
		Units:         cold,
		LeaseDuration: le.LeaseDuration.Duration,
		JudgeInterval: le.RetryPeriod.Duration,
		Labels:        map[string]string{layout.Label: el.layout},
	})
	cfg.Controllers.SetMembers(members, el.identity)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := members.Run(runCtx); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot follow the other replicas; this replica leads only what it can take")
		}
	}()
	// Leave as soon as shutdown begins, before the units drain, so that
	// each Lease they release has a taker waiting, warm: this replica
	// follows the others until it is done, and a shard it leads drains
	// once its new assignee states it warm (drainWhenUnassigned).
	var once sync.Once
	leave := func() {
		once.Do(func() {
			leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), le.RenewDeadline.Duration)
			defer cancel()
			if err := members.Leave(leaveCtx); err != nil {
				klog.FromContext(ctx).Error(err, "Cannot delete this replica's member Lease; the others take its controllers after the lease duration")
			}
		})
	}
	stopLeaving := context.AfterFunc(ctx, leave)
	return members, func() {
		stopLeaving()
		leave()
		stop()
		<-done
	}
}
