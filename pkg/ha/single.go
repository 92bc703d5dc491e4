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
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/elector"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
)

// runSingle runs every enabled controller's workers only while this
// replica holds the one Lease. A warm standby builds the controllers and
// syncs their caches before it competes; a cold one only once it leads. On
// shutdown (ctx done) the controllers drain first, then the Lease is
// released; standbys watch it and try at once (pkg/elector). Losing the
// Lease while leading stops the controllers and returns
// ErrLeaderElectionLost.
func runSingle(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	le := cfg.LeaderElection
	units := Units(cfg.Enabled, 1)
	names := Names(units)

	el, err := newElection(ctx, cfg, 1)
	if err != nil {
		return err
	}
	defer el.shutdown()
	// The namespace's Leases: this Lease's release wakes a standby at once
	// (pkg/elector), and the layout fence follows the group's.
	watchCtx, stopWatching := context.WithCancel(ctx)
	leases := elector.NewLeaseWatch(watchCtx, el.client, el.namespace)
	defer func() { stopWatching(); leases.Shutdown() }()
	fence, err := newFence(cfg, el, leases)
	if err != nil {
		return err
	}
	defer fence.Stop()
	go fence.Run(watchCtx)
	// The fence judges from the namespace's Leases: the election starts
	// once they are listed, or its first try would find it refused and wait
	// a retry period.
	if !cache.WaitForCacheSync(ctx.Done(), fence.HasSynced) {
		return nil
	}
	attempts := &elector.Attempts{}
	defer leases.Watch(watchCtx, le.ResourceName, el.identity, attempts.Wake, nil).Stop()
	// Another Lease layout's last Lease released: try at once.
	opened, unsubscribe := fence.Subscribe()
	defer unsubscribe()
	go func() {
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-opened:
				attempts.Wake()
			}
		}
	}()
	lock, err := el.lock(le.ResourceName)
	if err != nil {
		return err
	}
	lock = cfg.wrap(attempts.Lock(fence.Lock(lock)))
	// The controllers' clients refuse to write unless this Lease was renewed
	// within the renew deadline (pkg/leaseguard). The wrappers' order, and
	// why, is in this package's documentation.
	guard := leaseguard.New(le.ResourceName, le.RenewDeadline.Duration)
	lock = guard.Lock(lock)
	guardFor := func(string) *leaseguard.Guard { return guard }

	// A warm standby's informers and event handlers run from now on; its
	// clients carry the guard, which refuses every write until it leads.
	var warm Set
	if cfg.WarmStandby {
		if warm, err = cfg.Controllers.Start(ctx, units, guardFor); err != nil {
			return err
		}
		defer warm.Stop()
	}

	// The election runs on its own context so that the Lease is released
	// only after the controllers have stopped, not as soon as ctx is done.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var started, lost atomic.Bool
	var runErr error
	controllersDone := make(chan struct{})
	context.AfterFunc(ctx, func() {
		if started.Load() {
			<-controllersDone
		}
		stopElection()
	})

	standby := "cold"
	if cfg.WarmStandby {
		standby = "warm"
	}
	logger.Info("Waiting to acquire the lease", "lease", el.namespace+"/"+le.ResourceName, "identity", el.identity, "standby", standby)
	err = attempts.Run(electionCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		WatchDog:        cfg.WatchDog,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadingCtx context.Context) {
				defer close(controllersDone)
				if ctx.Err() != nil {
					return
				}
				started.Store(true)
				cfg.Controllers.SetLeading(names, true)
				logger.Info("Started leading")
				// leadingCtx dies with the Lease: every reconcile in flight
				// is cancelled at once. A shutdown (ctx done) only drains;
				// the Lease is released after that.
				runCtx, cancel := context.WithCancel(leadingCtx)
				defer cancel()
				set := warm
				if set == nil {
					if set, runErr = cfg.Controllers.Start(runCtx, units, guardFor); runErr != nil {
						stopElection()
						return
					}
					defer set.Stop()
				}
				set.Run(runCtx, ctx.Done(), names)
				// Stopped: no longer leading, before the Lease is released
				// and another replica can say it leads.
				cfg.Controllers.SetLeading(names, false)
			},
			OnStoppedLeading: func() {
				guard.Lost()
				cfg.Controllers.SetLeading(names, false)
				if ctx.Err() == nil && started.Load() {
					lost.Store(true)
				}
			},
			OnNewLeader: func(id string) {
				if id != el.identity {
					logger.Info("New leader elected", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	if runErr != nil {
		return runErr
	}
	if lost.Load() {
		// The reconciles in flight were cancelled with the Lease and the
		// lease guard refuses their writes: exit now, as
		// kube-controller-manager does, after a brief moment for the
		// workers to return and log.
		select {
		case <-controllersDone:
		case <-time.After(LeaseLostGrace):
		}
		return ErrLeaderElectionLost
	}
	if started.Load() {
		logger.Info("Stopped leading and released the lease")
	} else {
		logger.Info("Stopped without having led")
	}
	return nil
}
