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

package elector

import (
	"context"
	"errors"
	"sync"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// A standby's elector tries for its Lease once per retry period, jittered up
// to 2.2 periods, so after a leader releases its Lease on shutdown the
// standby would notice only 2 to 4.4 s later with the defaults. It therefore
// also watches its Lease (through the one informer on the namespace's
// Leases, LeaseWatch), and when the watch shows the Lease released it ends
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

// Attempts runs one Lease's election as a sequence of client-go
// electors, ending the current one early (wake) only while it has not
// acquired the Lease.
type Attempts struct {
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
// while its write is in flight (see Attempts.writing).
func (a *Attempts) Lock(inner resourcelock.Interface) resourcelock.Interface {
	return &attemptLock{Interface: inner, a: a}
}

// run runs electors with cfg, one after the other, until one ends other
// than by wake: ctx is done, or the Lease was held and then lost or
// released. cfg.Lock must come from a.Lock. Callbacks.OnStoppedLeading runs
// at the end of every attempt, as client-go calls it on every return.
func (a *Attempts) Run(ctx context.Context, cfg leaderelection.LeaderElectionConfig) error {
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

func (a *Attempts) begin(cancel context.CancelFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancel, a.acquired, a.woken, a.writing, a.pending = cancel, false, false, false, false
}

// end closes the current attempt and says whether wake ended it.
func (a *Attempts) end() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancel = nil
	return a.woken
}

// wake ends the current attempt if it is still trying to acquire; with a
// write in flight, once that write has failed.
func (a *Attempts) Wake() {
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
func (a *Attempts) write(holder, identity string, do func() error) error {
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
	a *Attempts
}

func (l *attemptLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.a.write(ler.HolderIdentity, l.Identity(), func() error { return l.Interface.Create(ctx, ler) })
}

func (l *attemptLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.a.write(ler.HolderIdentity, l.Identity(), func() error { return l.Interface.Update(ctx, ler) })
}
