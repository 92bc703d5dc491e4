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
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/leaseguard"
)

// controllerLease is the Lease name of one controller in per-controller mode.
func controllerLease(resourceName, controller string) string {
	return resourceName + "-" + controller
}

// runPerController runs each enabled controller under its own Lease,
// <leader-elect-resource-name>-<controller>. Every controller is built and
// its caches synced at once (a warm standby for each); its workers run while
// this instance holds its Lease. Losing one Lease cancels that controller's
// reconciles and stops it alone; it is rebuilt and competes again. On
// shutdown every controller drains, then its Lease is released.
func (m *Manager) runPerController(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	le := m.opts.LeaderElection
	el, err := m.newElection(ctx)
	if err != nil {
		return err
	}
	defer el.shutdown()

	guards := map[string]*leaseguard.Guard{}
	for _, d := range m.enabled {
		name := controllerLease(le.ResourceName, d.Name)
		guards[d.Name] = leaseguard.New(name, le.RenewDeadline.Duration)
		m.status.setLease(d.Name, name)
	}
	set, err := m.startControllers(ctx, func(controller string) *leaseguard.Guard { return guards[controller] })
	if err != nil {
		return err
	}
	defer set.stop()

	spread := newSpread(le.RetryPeriod.Duration)
	logger.Info("Competing for one Lease per controller", "namespace", el.namespace, "identity", el.identity)
	// A controller that can no longer compete shuts the others down (they
	// drain and release their Leases) and the process exits non-zero, to be
	// restarted, rather than stay up without ever leading that controller.
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var wg sync.WaitGroup
	for i, d := range m.enabled {
		first := set.controllers[i]
		wg.Go(func() {
			if err := m.leadController(runCtx, el, set, d, first, guards[d.Name], spread); err != nil {
				fail(fmt.Errorf("controller %s: %w", d.Name, err))
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
// running the controller while it holds it. After a loss the controller,
// whose queue was shut down, is rebuilt on the running informers (they
// replay their caches to its new handlers) and competes again.
func (m *Manager) leadController(ctx context.Context, el *election, set *controllerSet, d ControllerDescriptor,
	c Controller, guard *leaseguard.Guard, spread *spread) error {
	le := m.opts.LeaderElection
	name := controllerLease(le.ResourceName, d.Name)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "controller", d.Name, "lease", el.namespace+"/"+name)
	attempts := &electionAttempts{}
	watchCtx, stopWatching := context.WithCancel(ctx)
	waitWatch := watchRelease(watchCtx, el.client, el.namespace, name, attempts.wake)
	defer func() { stopWatching(); waitWatch() }()
	for ctx.Err() == nil {
		lock, err := el.lock(name)
		if err != nil {
			return err
		}
		lock = attempts.lock(lock)
		if m.wrapLock != nil {
			lock = m.wrapLock(lock)
		}
		// The wrappers' order, and why, is in the leaseguard package doc.
		sl := spread.lock(guard.Lock(lock))

		// As in the single-Lease mode, the election has its own context so
		// that the Lease is released only after the controller drained.
		electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
		var started atomic.Bool
		done := make(chan struct{})
		stopOnShutdown := context.AfterFunc(ctx, func() {
			if started.Load() {
				<-done
			}
			stopElection()
		})
		// Run returns when the Lease is lost or released; a controller that
		// led has then been cancelled and stops within leaseLostGrace.
		err = attempts.run(electionCtx, leaderelection.LeaderElectionConfig{
			Lock:            sl,
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
					m.status.setLeading([]ControllerDescriptor{d}, true)
					logger.Info("Started leading the controller")
					runCtx, cancel := context.WithCancel(leadingCtx)
					defer cancel()
					m.runControllers(runCtx, ctx.Done(), set, []Controller{c})
				},
				OnStoppedLeading: func() {
					guard.Lost()
					sl.lost()
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
		if ctx.Err() != nil {
			logger.Info("Stopped leading the controller and released its Lease")
			return nil
		}
		logger.Info("Lost the controller's Lease; its reconciles were cancelled, the other controllers go on")
		if c, err = set.build(ctx, d); err != nil {
			return fmt.Errorf("rebuilding it after it lost its Lease: %w", err)
		}
		m.status.setRunning([]Controller{c}, false)
	}
	return nil
}

// spread makes replicas share the controllers' Leases: a replica tries for
// a Lease only after a delay of two retry periods (more than the election's
// jitter of 1.2 periods) per Lease it holds or is already trying for, so the
// replica holding fewest gets there first.
type spread struct {
	step  time.Duration
	mu    sync.Mutex
	held  int // Leases held
	tries int // acquisitions in progress
}

func newSpread(retry time.Duration) *spread {
	return &spread{step: 2 * retry}
}

func (s *spread) lock(inner resourcelock.Interface) *spreadLock {
	return &spreadLock{Interface: inner, s: s}
}

// turn counts a new acquisition in progress and returns how long it waits
// and how many Leases were held when it started.
func (s *spread) turn() (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := time.Duration(s.held+s.tries) * s.step
	s.tries++
	return wait, s.held
}

// gained is how many Leases were won since held were held.
func (s *spread) gained(held int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held - held
}

// done ends an acquisition, successful or not.
func (s *spread) done(acquired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries--
	if acquired {
		s.held++
	}
}

func (s *spread) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
}

// errTakenMeanwhile ends an acquisition whose Lease another replica took
// while this one waited its turn.
var errTakenMeanwhile = errors.New("the Lease was taken while this replica waited its turn")

// spreadLock delays acquisitions (not renewals) of one Lease by how many
// Leases its replica holds or is trying for.
type spreadLock struct {
	resourcelock.Interface
	s *spread

	mu      sync.Mutex
	held    bool
	stamped restamp
	// observed is the Lease as the elector last read it (nil: not found),
	// the read its decision to acquire rests on.
	observed []byte
}

// Get records what the elector saw, to tell after a wait whether the Lease
// changed meanwhile.
func (l *spreadLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ler, raw, err := l.Interface.Get(ctx)
	if err == nil || apierrors.IsNotFound(err) {
		l.mu.Lock()
		l.observed = raw
		l.mu.Unlock()
	}
	return ler, raw, err
}

func (l *spreadLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.acquire(ctx, ler, l.Interface.Create)
}

func (l *spreadLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	held, stamped := l.held, l.stamped
	l.mu.Unlock()
	if held {
		// The elector renews with the acquire time it stamped before the
		// wait; keep the one that was written.
		if ler.AcquireTime.Equal(&stamped.stale) {
			ler.AcquireTime = stamped.fresh
		}
		err := l.Interface.Update(ctx, ler)
		if err == nil && ler.HolderIdentity == "" {
			l.lost() // released
		}
		return err
	}
	return l.acquire(ctx, ler, l.Interface.Update)
}

// acquire waits its turn, reads the Lease again (so that the write carries
// what was read after the wait) and tries unless another replica took it
// meanwhile. The elector decided to acquire from its last read, judging the
// holder by when it saw the Lease change, as client-go does; so a Lease
// that changed since that read and names another holder is live, whatever
// its renewTime says: the holder's clock is never compared with ours. The
// record's times, stamped by the elector before the wait, are
// stamped again, so that the Lease's acquireTime says when it was acquired.
func (l *spreadLock) acquire(ctx context.Context, ler resourcelock.LeaderElectionRecord,
	write func(context.Context, resourcelock.LeaderElectionRecord) error) (err error) {
	try := func() error { return write(ctx, ler) }
	wait, held := l.s.turn()
	defer func() { l.s.done(err == nil) }()
	if wait > 0 {
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		// Leases won meanwhile (by this replica's other tries) count too.
		if more := l.s.gained(held); more > 0 {
			if err := sleep(ctx, time.Duration(more)*l.s.step); err != nil {
				return err
			}
		}
		l.mu.Lock()
		observed := l.observed
		l.mu.Unlock()
		rec, raw, err := l.Interface.Get(ctx)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		case rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() && !bytes.Equal(raw, observed):
			return errTakenMeanwhile
		}
	}
	stamped := restamp{stale: ler.AcquireTime, fresh: ler.AcquireTime}
	if wait > 0 && ler.AcquireTime.Equal(&ler.RenewTime) { // a new acquisition, not this holder's reclaim
		stamped.fresh = metav1.NewTime(time.Now())
		ler.AcquireTime, ler.RenewTime = stamped.fresh, stamped.fresh
	}
	if err := try(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.stamped = true, stamped
	return nil
}

// restamp maps the acquire time the elector stamped to the one written.
type restamp struct{ stale, fresh metav1.Time }

// lost records that the Lease is no longer held.
func (l *spreadLock) lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		l.held = false
		l.s.release()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
