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

package app

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/elector"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/pkg/membership"
)

// controllerLease is the Lease name of one controller in per-controller mode.
func controllerLease(resourceName, controller string) string {
	return resourceName + "-" + controller
}

// runPerController runs each enabled controller under its own Lease,
// <leader-elect-resource-name>-<controller>. Every controller is built and
// its caches synced at once (a warm standby for each); its workers run while
// this instance holds its Lease. The replicas share the controllers through
// membership (pkg/membership): each tries only for the Leases of the
// controllers assigned to it, and hands back, drained, those assigned
// elsewhere after a replica joins. Losing one Lease cancels that
// controller's reconciles and stops it alone; it is rebuilt and competes
// again. On shutdown this replica leaves the membership, every controller
// drains, then its Lease is released.
func (m *Manager) runPerController(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	le := m.opts.LeaderElection
	us := units(m.enabled, m.opts.HA.Shards)
	el, err := m.newElection(ctx, len(us))
	if err != nil {
		return err
	}
	defer el.shutdown()

	guards := map[string]*leaseguard.Guard{}
	var whole []ControllerDescriptor // built at once, warm
	for _, u := range us {
		name := controllerLease(le.ResourceName, u.Name)
		guards[u.Name] = leaseguard.New(name, le.RenewDeadline.Duration)
		m.status.setLease(u.Name, name)
		if u.shard == nil {
			whole = append(whole, u.ControllerDescriptor)
		}
	}
	guardFor := func(name string) *leaseguard.Guard { return guards[name] }
	set, err := m.startSet(ctx, nil, whole, guardFor)
	if err != nil {
		return err
	}
	defer set.stop()

	members, leave := m.joinMembers(ctx, el, us)
	defer leave()
	// One watch on the namespace's Leases for every unit's elector and the
	// layout fence; it stops after them (deferred before runCtx's cancel
	// runs).
	leaseCtx, stopLeases := context.WithCancel(context.WithoutCancel(ctx))
	leases := elector.NewLeaseWatch(leaseCtx, el.client, el.namespace)
	defer func() { stopLeases(); leases.Shutdown() }()
	fence, err := m.newFence(el, leases)
	if err != nil {
		return err
	}
	defer fence.Stop()
	go fence.Run(leaseCtx)
	// As in the single-Lease mode: the electors start once the fence has
	// listed the namespace's Leases.
	if !cache.WaitForCacheSync(ctx.Done(), fence.HasSynced) {
		return nil
	}
	logger.Info("Competing for one Lease per controller", "namespace", el.namespace, "identity", el.identity, "units", len(us))
	// A controller that can no longer compete shuts the others down (they
	// drain and release their Leases) and the process exits non-zero, to be
	// restarted, rather than stay up without ever leading that controller.
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var wg sync.WaitGroup
	built := map[string]Controller{}
	for _, c := range set.controllers {
		built[c.Name()] = c
	}
	warm := newWarmUnits()
	for _, u := range us {
		var cold *coldUnit
		if u.shard != nil {
			cold = &coldUnit{m: m, u: u, guardFor: guardFor, warm: warm, members: members}
			wg.Go(func() { warm.follow(runCtx, members, cold, le.RetryPeriod.Duration) })
		}
		wg.Go(func() {
			if err := m.leadController(runCtx, el, leases, fence, set, u.ControllerDescriptor, built[u.Name], guards[u.Name], members, cold); err != nil {
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

// leadController competes for one controller's Lease until ctx is done,
// running the controller while it holds it and membership assigns it here.
// After a loss or a handover the controller, whose queue was shut down, is
// rebuilt on the running informers (they replay their caches to its new
// handlers) and competes again.
//
// A shard unit (cold not nil) is built, with informers of its own range,
// only once it leads, and stopped when it stops leading: a replica caches
// only the shards it leads.
func (m *Manager) leadController(ctx context.Context, el *election, leases *elector.LeaseWatch, fence *layout.Fence, set *controllerSet, d ControllerDescriptor,
	c Controller, guard *leaseguard.Guard, members *membership.Members, cold *coldUnit) error {
	le := m.opts.LeaderElection
	name := controllerLease(le.ResourceName, d.Name)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "controller", d.Name, "lease", el.namespace+"/"+name)
	attempts := &elector.Attempts{}
	mine := func() bool { return members.Mine(d.Name) }
	watchCtx, stopWatching := context.WithCancel(ctx)
	// Assigned here while its Lease is free or expired, and not fenced
	// out: try at once, not at the next retry.
	expired := make(chan struct{}, 1)
	watched := leases.Watch(ctx, name, el.identity, attempts.Wake, func() {
		select {
		case expired <- struct{}{}:
		default:
		}
	})
	defer func() { stopWatching(); watched.Stop() }()
	assignments, unsubscribe := members.Subscribe()
	opened, unsubscribeFence := fence.Subscribe() // another layout's last Lease released
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
		lock = attempts.Lock(fence.Lock(lock))
		if m.wrapLock != nil {
			lock = m.wrapLock(lock)
		}
		// The wrappers' order, and why, is in the leaseguard package doc.
		al := elector.AssignedLock(guard.Lock(lock), mine)

		// As in the single-Lease mode, the election has its own context so
		// that the Lease is released only after the controller drained.
		electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
		var started, handedOver, buildFailed atomic.Bool
		done := make(chan struct{})
		stopOnShutdown := context.AfterFunc(ctx, func() {
			if started.Load() {
				<-done
			}
			stopElection()
		})
		// Run returns when the Lease is lost or released; a controller that
		// led has then been cancelled and stops within leaseLostGrace.
		err = attempts.Run(electionCtx, leaderelection.LeaderElectionConfig{
			Lock:            al,
			LeaseDuration:   le.LeaseDuration.Duration,
			RenewDeadline:   le.RenewDeadline.Duration,
			RetryPeriod:     le.RetryPeriod.Duration,
			ReleaseOnCancel: true,
			WatchDog:        m.controllerHealth[d.Name],
			Name:            name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leadingCtx context.Context) {
					defer close(done)
					if ctx.Err() != nil {
						return
					}
					started.Store(true)
					members.SetHolding(d.Name, true)
					m.status.setLeading([]ControllerDescriptor{d}, true)
					logger.Info("Started leading the controller")
					runCtx, cancel := context.WithCancel(leadingCtx)
					defer cancel()
					// A whole controller is warm on every replica; a shard
					// is once its assignee says so.
					var waitWarm time.Duration
					if cold != nil {
						waitWarm = m.waitWarm()
					}
					drain, stopWatching := drainWhenUnassigned(ctx, members, d.Name, &handedOver, waitWarm)
					defer stopWatching()
					runSet, run := set, c
					if cold != nil {
						unitSet, err := cold.take(runCtx)
						if err != nil {
							logger.Error(err, "Cannot build the shard; releasing its Lease")
							buildFailed.Store(true)
							stopElection()
							return
						}
						defer unitSet.stop()
						runSet, run = unitSet, unitSet.controllers[0]
					}
					m.runControllers(runCtx, drain, runSet, []Controller{run})
					// Drained: no longer leading, said before the Lease is
					// released (ReleaseOnCancel) for the replica it is
					// assigned to, or on shutdown, so that two replicas never
					// both say they lead it.
					m.status.setLeading([]ControllerDescriptor{d}, false)
					stopElection()
				},
				OnStoppedLeading: func() {
					guard.Lost()
					members.SetHolding(d.Name, false) // released or lost
					m.status.setLeading([]ControllerDescriptor{d}, false)
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
		case <-time.After(leaseLostGrace):
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
			logger.Info("Handed the controller over to the replica it is now assigned to", "assignee", members.Owner(d.Name))
		default:
			logger.Info("Lost the controller's Lease; its reconciles were cancelled, the other controllers go on")
		}
		if cold != nil {
			buildBackoff = newBuildBackoff() // it was built: a failure starts over
			continue                         // built again when it leads again
		}
		if c, err = set.build(ctx, d); err != nil {
			return fmt.Errorf("rebuilding it after it stopped leading: %w", err)
		}
		m.status.setRunning([]Controller{c}, false)
	}
	return nil
}

// newBuildBackoff is the delay before a shard whose build failed competes
// again: 1 s, doubling up to 2 minutes.
func newBuildBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 2 * time.Minute}
}

// drainWhenUnassigned returns a channel closed when membership has
// assigned the controller to another replica (a handover, recorded in
// handedOver, or this replica's shutdown, after which it leaves) and that
// replica is warm (it states the unit's caches synced, or builds none
// ahead, or there is none), or after waitWarm: either way the controller
// drains gracefully.
func drainWhenUnassigned(ctx context.Context, members *membership.Members, unit string, handedOver *atomic.Bool, waitWarm time.Duration) (<-chan struct{}, func()) {
	drain := make(chan struct{})
	stop := make(chan struct{})
	changes, unsubscribe := members.Subscribe()
	go func() {
		defer close(drain)
		defer unsubscribe() // a subscription per term of leading, ended with it
		var unassigned <-chan time.Time
		shutdown := ctx.Done()
		for {
			mine := members.Mine(unit)
			if mine && shutdown != nil {
				unassigned = nil
			} else {
				if unassigned == nil {
					unassigned = time.After(waitWarm)
				}
				// Shutting down, the unit is still assigned here until
				// Leave has judged; the others see it gone after.
				if !mine && members.Ready(unit) {
					handedOver.Store(true)
					return
				}
			}
			select {
			case <-shutdown:
				// This replica leaves: the unit is assigned elsewhere
				// as soon as the others see it gone.
				shutdown = nil
			case <-stop:
				return
			case <-changes:
			case <-unassigned:
				handedOver.Store(true)
				return
			}
		}
	}()
	var once sync.Once
	return drain, func() { once.Do(func() { close(stop) }) }
}

// joinMembers announces this replica to the others running the same
// controllers and follows them, until ctx is done; leave (deferred by the
// caller) waits for that and deletes the member Lease, so that the others
// take this replica's controllers as soon as it releases them.
//
// A replica offers each controller once that controller's own caches have
// synced (managerStatus.followSync), so that one handed to it runs at once,
// as a warm standby's does, and one whose caches cannot sync (its CRD or
// its RBAC rule missing) keeps only itself from being led here. A shard unit
// is offered at once: it builds its caches when it leads.
func (m *Manager) joinMembers(ctx context.Context, el *election, us []unit) (*membership.Members, func()) {
	le := m.opts.LeaderElection
	var cold []string
	for _, u := range us {
		if u.shard != nil {
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
	m.status.setMembers(members, el.identity)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := members.Run(runCtx); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot follow the other replicas; this replica leads only what it can take")
		}
	}()
	// Leave as soon as shutdown begins, before the controllers drain, so
	// that each Lease they release has a taker waiting, warm: this replica
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

// coldUnit builds a shard unit: its controller, on informer factories of
// its own that list and watch only its range, ahead of leading it while it
// is assigned here (warmUnits), or when it leads.
type coldUnit struct {
	m        *Manager
	u        unit
	guardFor func(string) *leaseguard.Guard
	warm     *warmUnits
	members  *membership.Members
}

// take returns the unit's set for a term of leading: the one built while
// it was assigned here, else one built now. Its stop ends the term.
func (c *coldUnit) take(ctx context.Context) (*controllerSet, error) {
	set := c.warm.take(c.u.Name, c.members)
	if set == nil {
		var err error
		if set, err = c.start(ctx); err != nil {
			c.warm.done(c.u.Name)
			return nil, err
		}
	}
	stop := set.stop
	set.stop = func() {
		stop()
		c.warm.done(c.u.Name)
	}
	return set, nil
}

// start builds the unit and starts its informers; its controller waits for
// their caches before it works, as a cold standby's does.
func (c *coldUnit) start(ctx context.Context) (*controllerSet, error) {
	return c.m.startSet(ctx, &c.u, []ControllerDescriptor{c.u.ControllerDescriptor}, c.guardFor)
}
