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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// A standby's elector tries for its Lease once per retry period, jittered up
// to 2.2 periods, so after a leader releases its Lease on shutdown the
// standby would notice only 2 to 4.4 s later with the defaults. It therefore
// also watches its Lease (through the one informer on the namespace's
// Leases, leaseWatch), and when the watch shows the Lease released it ends
// the waiting elector and starts a new one, whose first try is immediate.
//
// A Lease whose holder was killed expires instead. A unit's elector would
// notice that at its first retry after a lease duration from when it first
// saw the last renewal: up to 2.2 retry periods late twice over. So the
// watch also times each version held elsewhere, from its delivery, and
// when it expires with nothing written since, wakes the elector of a unit
// assigned here, whose lock (watchedLock) shows that version as released:
// the new elector acquires at once, by an update that carries the
// version's resourceVersion, so a renewal the watch has not delivered yet
// makes it fail.

// errAttemptEnded refuses a Lease write of an election attempt that was
// ended to start a new one.
var errAttemptEnded = errors.New("this election attempt was ended for a fresh one")

// electionAttempts runs one Lease's election as a sequence of client-go
// electors, ending the current one early (wake) only while it has not
// acquired the Lease.
type electionAttempts struct {
	mu       sync.Mutex
	cancel   context.CancelFunc // the current attempt's; nil between attempts
	acquired bool               // the current attempt wrote the Lease for this identity
	woken    bool               // the current attempt was ended by wake
	// writing: a write of the current attempt is in flight. A wake then
	// waits for its answer (pending): ending the attempt would lose an
	// acquisition the API server may have made, and the next attempt,
	// reading the Lease before it landed, would be refused by a conflict
	// and wait a retry period.
	writing, pending bool
}

// lock wraps the Lease's lock so that an attempt ended by wake can no longer
// acquire: a write it still makes is refused. A wake never ends an attempt
// while its write is in flight (see electionAttempts.writing).
func (a *electionAttempts) lock(inner resourcelock.Interface) resourcelock.Interface {
	return &attemptLock{Interface: inner, a: a}
}

// run runs electors with cfg, one after the other, until one ends other
// than by wake: ctx is done, or the Lease was held and then lost or
// released. cfg.Lock must come from a.lock. Callbacks.OnStoppedLeading runs
// at the end of every attempt, as client-go calls it on every return.
func (a *electionAttempts) run(ctx context.Context, cfg leaderelection.LeaderElectionConfig) error {
	for {
		attemptCtx, cancel := context.WithCancel(ctx)
		a.begin(cancel)
		elector, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			cancel()
			a.end()
			return err
		}
		elector.Run(attemptCtx)
		cancel()
		if !a.end() || ctx.Err() != nil {
			return nil
		}
		klog.FromContext(ctx).V(2).Info("The Lease was released; trying for it at once", "lease", cfg.Name)
	}
}

func (a *electionAttempts) begin(cancel context.CancelFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancel, a.acquired, a.woken, a.writing, a.pending = cancel, false, false, false, false
}

// end closes the current attempt and says whether wake ended it.
func (a *electionAttempts) end() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancel = nil
	return a.woken
}

// wake ends the current attempt if it is still trying to acquire; with a
// write in flight, once that write has failed.
func (a *electionAttempts) wake() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancel == nil || a.acquired || a.woken {
		return
	}
	if a.writing {
		a.pending = true
		return
	}
	a.woken = true
	a.cancel()
}

// write runs one Create or Update of the Lease for the current attempt.
func (a *electionAttempts) write(holder, identity string, do func() error) error {
	a.mu.Lock()
	if a.woken {
		a.mu.Unlock()
		return errAttemptEnded
	}
	a.writing = true
	a.mu.Unlock()
	err := do()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writing = false
	switch {
	case err == nil && holder == identity:
		a.acquired = true
	case a.pending && err != nil:
		a.woken = true
		a.cancel()
	}
	a.pending = false
	return err
}

type attemptLock struct {
	resourcelock.Interface
	a *electionAttempts
}

func (l *attemptLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.a.write(ler.HolderIdentity, l.Identity(), func() error { return l.Interface.Create(ctx, ler) })
}

func (l *attemptLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.a.write(ler.HolderIdentity, l.Identity(), func() error { return l.Interface.Update(ctx, ler) })
}

// leaseWatch is one informer on the Leases of a namespace. Every unit's
// elector watches its Lease through the same one, and the layout fence the
// group's, so a replica keeps one watch on the API server however many
// units it competes for (64 at --shards=64), not one per unit.
type leaseWatch struct {
	namespace string
	informer  cache.SharedIndexInformer
	lister    coordinationlisters.LeaseNamespaceLister
	shutdown  func()
}

// newLeaseWatch starts the informer; it stops when ctx is done, and
// shutdown waits for that.
func newLeaseWatch(ctx context.Context, client kubernetes.Interface, namespace string) *leaseWatch {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	w := &leaseWatch{namespace: namespace, informer: factory.Coordination().V1().Leases().Informer(),
		lister: factory.Coordination().V1().Leases().Lister().Leases(namespace), shutdown: factory.Shutdown}
	factory.Start(ctx.Done())
	return w
}

// watchedLease is one Lease as this replica's watch shows it.
type watchedLease struct {
	stop func()
	// lookup returns the Lease as last seen, and whether the watch has
	// synced (nil, true: there is no such Lease).
	lookup func() (*coordinationv1.Lease, bool)

	mu sync.Mutex
	// raw is the record of the version last seen held by another replica,
	// expires when it expires by this replica's clock: the time the watch
	// delivered it plus its lease duration, as client-go judges a holder by
	// when it saw the record change (a delivery is never before the write).
	raw     []byte
	expires time.Time
	timer   *time.Timer
}

// released says whether the Lease, as last seen, has no holder.
func (l *watchedLease) released() bool {
	lease, synced := l.lookup()
	return synced && (lease == nil || holder(lease) == "")
}

// expired says whether raw is the record of the version last seen held,
// and that version has expired: its holder wrote nothing since for a lease
// duration.
func (l *watchedLease) expired(raw []byte, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw != nil && bytes.Equal(raw, l.raw) && !now.Before(l.expires)
}

// saw records a version delivered by the watch, and calls expire once it
// expires unless another version comes first.
func (l *watchedLease) saw(obj any, identity string, expire func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.raw, l.timer = nil, nil
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || holder(lease) == "" || holder(lease) == identity || lease.Spec.LeaseDurationSeconds == nil {
		return
	}
	raw := leaseRecord(lease)
	d := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	l.raw, l.expires = raw, time.Now().Add(d)
	if expire != nil {
		l.timer = time.AfterFunc(d, expire)
	}
}

// watch follows the Lease name through the informer until stop: it calls
// wake whenever the Lease goes from held to released (no holder) or is
// deleted, and expire (if not nil) once a version held by another replica
// than identity expires with nothing written since.
func (w *leaseWatch) watch(ctx context.Context, name, identity string, wake, expire func()) *watchedLease {
	l := &watchedLease{}
	reg, err := w.informer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				return tombstone.Key == w.namespace+"/"+name
			}
			lease, ok := obj.(*coordinationv1.Lease)
			return ok && lease.Name == name
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { l.saw(obj, identity, expire) },
			UpdateFunc: func(oldObj, newObj any) {
				l.saw(newObj, identity, expire)
				if holder(oldObj) != "" && holder(newObj) == "" {
					wake()
				}
			},
			DeleteFunc: func(any) {
				l.saw(nil, identity, nil)
				wake()
			},
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot watch the Lease for its release; a standby notices it at its next retry", "lease", w.namespace+"/"+name)
	}
	l.stop = func() {
		if reg != nil {
			_ = w.informer.RemoveEventHandler(reg)
		}
		l.saw(nil, identity, nil)
	}
	l.lookup = func() (*coordinationv1.Lease, bool) {
		if !w.informer.HasSynced() {
			return nil, false
		}
		lease, err := w.lister.Get(name)
		if apierrors.IsNotFound(err) {
			return nil, true
		}
		return lease, err == nil
	}
	return l
}

func holder(obj any) string {
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}
