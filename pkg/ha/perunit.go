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
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/elector"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/pkg/membership"
)

// perUnit is what every unit's elector shares in per-controller mode.
type perUnit struct {
	cfg     Config
	el      *election
	leases  *elector.LeaseWatch
	fence   *layout.Fence
	members *membership.Members
	// whole is the set of the whole controllers, built at once (warm);
	// shard units are built apart (coldUnit).
	whole  Set
	guards map[string]*leaseguard.Guard
	warm   *warmUnits
}

func (p *perUnit) guardFor(unit string) *leaseguard.Guard { return p.guards[unit] }

// runPerUnit runs each unit under its own Lease,
// <leader-elect-resource-name>-<unit>. Every whole controller is built and
// its caches synced at once (a warm standby for each); its workers run
// while this replica holds its Lease. The replicas share the units through
// membership (pkg/membership): each tries only for the Leases of the units
// assigned to it, and hands back, drained, those assigned elsewhere after a
// replica joins. Losing one Lease cancels that unit's reconciles and stops
// it alone; it is rebuilt and competes again. On shutdown this replica
// leaves the membership, every unit drains, then its Lease is released.
func runPerUnit(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	le := cfg.LeaderElection
	us := Units(cfg.Enabled, cfg.Shards)
	el, err := newElection(ctx, cfg, len(us))
	if err != nil {
		return err
	}
	defer el.shutdown()

	p := &perUnit{cfg: cfg, el: el, guards: map[string]*leaseguard.Guard{}, warm: newWarmUnits()}
	var whole []Unit // built at once, warm
	for _, u := range us {
		name := LeaseName(le.ResourceName, u.Name)
		p.guards[u.Name] = leaseguard.New(name, le.RenewDeadline.Duration)
		cfg.Controllers.SetLease(u.Name, name)
		if u.Shard == nil {
			whole = append(whole, u)
		}
	}
	if p.whole, err = cfg.Controllers.Start(ctx, whole, p.guardFor); err != nil {
		return err
	}
	defer p.whole.Stop()

	var leave func()
	p.members, leave = joinMembers(ctx, cfg, el, us)
	defer leave()
	// One watch on the namespace's Leases for every unit's elector and the
	// layout fence; it stops after them (deferred before runCtx's cancel
	// runs).
	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	p.leases = elector.NewLeaseWatch(leaseCtx, el.client, el.namespace)
	defer func() { stopLeases(); p.leases.Shutdown() }()
	if p.fence, err = newFence(cfg, el, p.leases); err != nil {
		return err
	}
	defer p.fence.Stop()
	go p.fence.Run(leaseCtx)
	// As in the single-Lease mode: the electors start once the fence has
	// listed the namespace's Leases.
	if !cache.WaitForCacheSync(ctx.Done(), p.fence.HasSynced) {
		return nil
	}
	logger.Info("Competing for one Lease per controller", "namespace", el.namespace, "identity", el.identity, "units", len(us))
	// A unit that can no longer compete shuts the others down (they drain
	// and release their Leases) and the process exits non-zero, to be
	// restarted, rather than stay up without ever leading that unit.
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var wg sync.WaitGroup
	for _, u := range us {
		var cold *coldUnit
		if u.Shard != nil {
			cold = &coldUnit{p: p, u: u}
			wg.Go(func() { p.warm.follow(runCtx, p.members, cold, le.RetryPeriod.Duration) })
		}
		wg.Go(func() {
			if err := p.lead(runCtx, u, cold); err != nil {
				fail(fmt.Errorf("controller %s: %w", u.Name, err))
			}
		})
	}
	wg.Wait()
	if ctx.Err() == nil {
		return context.Cause(runCtx)
	}
	return nil
}

// lead competes for one unit's Lease until ctx is done, running the unit
// while it holds it and membership assigns it here. After a loss or a
// handover a whole controller, whose queue was shut down, is rebuilt on the
// running informers and competes again.
//
// A shard unit (cold not nil) is built, with informers of its own range,
// ahead of leading while it is assigned here (warmUnits) or once it leads,
// and stopped when it stops leading: a replica caches only the shards it
// leads or is about to.
func (p *perUnit) lead(ctx context.Context, u Unit, cold *coldUnit) error {
	cfg, el, members := p.cfg, p.el, p.members
	le := cfg.LeaderElection
	name := LeaseName(le.ResourceName, u.Name)
	units := []string{u.Name}
	guard := p.guards[u.Name]
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "controller", u.Name, "lease", el.namespace+"/"+name)
	attempts := &elector.Attempts{}
	mine := func() bool { return members.Mine(u.Name) }
	watchCtx, stopWatching := context.WithCancel(ctx)
	// Assigned here while its Lease is free or expired, and not fenced
	// out: try at once, not at the next retry.
	expired := make(chan struct{}, 1)
	watched := p.leases.Watch(ctx, name, el.identity, attempts.Wake, func() {
		select {
		case expired <- struct{}{}:
		default:
		}
	})
	defer func() { stopWatching(); watched.Stop() }()
	assignments, unsubscribe := members.Subscribe()
	opened, unsubscribeFence := p.fence.Subscribe() // another layout's last Lease released
	go func() {
		defer unsubscribe()
		defer unsubscribeFence()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-assignments:
			case <-expired:
			case <-opened:
			}
			if mine() && watched.Takeable() {
				attempts.Wake()
			}
		}
	}()
	// A shard that cannot be built gives its Lease back and competes again
	// only after this backoff, not in a loop of acquire and release.
	buildBackoff := newBuildBackoff()
	for ctx.Err() == nil {
		lock, err := el.lock(name)
		if err != nil {
			return err
		}
		lock = elector.WatchedLock(lock, watched, mine)
		lock = cfg.wrap(attempts.Lock(p.fence.Lock(lock)))
		// The wrappers' order, and why, is in this package's documentation.
		al := elector.AssignedLock(guard.Lock(lock), mine)

		// As in the single-Lease mode, the election has its own context so
		// that the Lease is released only after the unit drained.
		electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
		var started, handedOver, buildFailed atomic.Bool
		done := make(chan struct{})
		stopOnShutdown := context.AfterFunc(ctx, func() {
			if started.Load() {
				<-done
			}
			stopElection()
		})
		// Run returns when the Lease is lost or released; a unit that led
		// has then been cancelled and stops within LeaseLostGrace.
		err = attempts.Run(electionCtx, leaderelection.LeaderElectionConfig{
			Lock:            al,
			LeaseDuration:   le.LeaseDuration.Duration,
			RenewDeadline:   le.RenewDeadline.Duration,
			RetryPeriod:     le.RetryPeriod.Duration,
			ReleaseOnCancel: true,
			WatchDog:        cfg.UnitWatchDogs[u.Name],
			Name:            name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leadingCtx context.Context) {
					defer close(done)
					if ctx.Err() != nil {
						return
					}
					started.Store(true)
					members.SetHolding(u.Name, true)
					cfg.Controllers.SetLeading(units, true)
					logger.Info("Started leading the controller")
					runCtx, cancel := context.WithCancel(leadingCtx)
					defer cancel()
					// A whole controller is warm on every replica; a shard
					// is once its assignee says so.
					var waitWarm time.Duration
					var othersWarm func() bool
					if cold != nil {
						waitWarm, othersWarm = le.LeaseDuration.Duration, p.fence.OthersWarm
					}
					drain, stopWatching := drainWhenUnassigned(ctx, members, u.Name, &handedOver, waitWarm, othersWarm)
					defer stopWatching()
					set := p.whole
					if cold != nil {
						shardSet, err := cold.take(runCtx)
						if err != nil {
							logger.Error(err, "Cannot build the shard; releasing its Lease")
							buildFailed.Store(true)
							stopElection()
							return
						}
						defer shardSet.Stop()
						set = shardSet
					}
					set.Run(runCtx, drain, units)
					// Drained: no longer leading, said before the Lease is
					// released (ReleaseOnCancel) for the replica it is
					// assigned to, or on shutdown, so that two replicas never
					// both say they lead it.
					cfg.Controllers.SetLeading(units, false)
					stopElection()
				},
				OnStoppedLeading: func() {
					guard.Lost()
					members.SetHolding(u.Name, false) // released or lost
					cfg.Controllers.SetLeading(units, false)
				},
			},
		})
		stopOnShutdown()
		stopElection()
		if err != nil {
			return err
		}
		if !started.Load() {
			return nil // shut down while standing by
		}
		select {
		case <-done:
		case <-time.After(LeaseLostGrace):
		}
		switch {
		case ctx.Err() != nil:
			logger.Info("Stopped leading the controller and released its Lease")
			return nil
		case buildFailed.Load():
			delay := buildBackoff.Step()
			logger.Info("Competing for the shard again after a backoff", "delay", delay)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(delay):
			}
			continue
		case handedOver.Load():
			logger.Info("Handed the controller over to the replica it is now assigned to", "assignee", members.Owner(u.Name))
		default:
			logger.Info("Lost the controller's Lease; its reconciles were cancelled, the other controllers go on")
		}
		if cold != nil {
			buildBackoff = newBuildBackoff() // it was built: a failure starts over
			continue                         // built again when it leads again
		}
		if err := p.whole.Rebuild(ctx, u.Name); err != nil {
			return fmt.Errorf("rebuilding it after it stopped leading: %w", err)
		}
	}
	return nil
}
