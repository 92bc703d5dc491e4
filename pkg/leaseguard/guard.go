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

// Package leaseguard refuses a leader's write requests once its Lease may
// have passed to someone else.
//
// Its documentation is the one page of the HA layer's invariants: who may
// write when (this package), who tries for which unit (pkg/membership), how
// a unit moves, and what a layout change does (pkg/layout, where the
// argument is). The code of the last two is in cmd/controller-manager/app.
//
// # Who may write when
//
// Cancelling the controllers' contexts when client-go's leader election
// reports the Lease lost is not enough: a process that was paused (SIGSTOP,
// a long GC or VM stall) resumes with its reconciles in flight, and their
// next request goes out before the election loop has had a chance to notice
// that it has not renewed for a while. The Guard sees that.
//
// A write leaves this process only while the last successful acquire or
// renewal of its Lease was SENT less than the renew deadline ago, on this
// process's monotonic clock, and no read since showed another holder and no
// release was written; a write still in flight when that deadline passes is
// cancelled, and the connection it goes over sends no byte past it (a
// process resuming from a pause runs the cancelling timer only after its
// other goroutines may have sent: the connection checks the clock itself). Another replica takes the Lease only after it has seen it
// unchanged for LeaseDurationSeconds on its own clock, counted from when it
// saw that renewal (its elector's read, or its watch's delivery), which is
// after it was sent, or once the holder released it. LeaseDurationSeconds
// is --leader-elect-lease-duration (validated to be whole seconds, so
// client-go writes it untruncated), which is validated to exceed the renew
// deadline: so this process stops writing before anyone else may start. No
// wall clock is compared across replicas; only clock rates are assumed to
// agree, as client-go assumes. Every acquisition is a create, or an update
// on the resourceVersion read, so of two replicas that judge a Lease free
// at once, one fails.
//
// # Who tries for which unit
//
// A unit is what one Lease covers: every controller (one Lease), each
// controller, or each shard of a shardable controller (--shards). Every
// replica runs an elector for every unit of its layout. Membership assigns
// each unit to one live member, from what the member Leases state (the
// units each offers once their caches synced, the units each holds, so
// that survivors keep theirs); only the assignee acquires, while renewals
// and releases always pass. Membership decides only who tries, never who
// may write: replicas that disagree on the assignment both try, and the
// Lease picks one.
//
// # How a unit moves
//
//   - Assigned elsewhere (a join, another's leave): the new assignee builds
//     the unit and syncs its caches first and states it warm; the holder
//     keeps leading until then (at most a lease duration), then stops its
//     workers taking keys, lets the reconciles in flight finish, says it no
//     longer leads, and releases the Lease. The assignee's watch sees the
//     release and its elector tries at once.
//   - SIGTERM: the replica leaves membership, drains every unit it leads
//     and releases its Leases; the new assignees, told by the release,
//     build the units as they take them (not warm).
//   - kill -9 or a partition: nothing is released. A survivor drops the
//     member the moment its member Lease has been unchanged for a lease
//     duration since the watch delivered it, and takes a unit assigned to
//     it the moment that unit's Lease has, by the same measure.
//   - A lost Lease (a renewal past the deadline) cancels the unit's
//     reconciles at once; the replica competes again.
//   - A unit that cannot be built releases its Lease and competes again
//     after a backoff.
//
// # What a layout change does
//
// A rolling update that changes --leader-elect-per-controller or --shards
// runs replicas of two layouts side by side, whose Leases cover the same
// objects under other names. The group's fence Lease states the leading
// layout; a replica acquires only while it states its own and no unit
// Lease of another layout is live, renews only while no other is stated,
// and states its own only once no unit Lease or member of another layout
// is live. So at most one layout leads a group at a time: the old one until
// its last replica is gone, then the new one at its next try (pkg/layout).
//
// # Order of the lock wrappers
// From the elector inwards, as cmd/controller-manager/app stacks them (the
// wrappers but the Guard's and the fence's are in pkg/elector):
//
//	AssignedLock (per-controller mode only: refuses to acquire a Lease
//	  membership assigns to another replica; renewals and releases pass)
//	→ Guard.Lock (stamps "sent" right before the write, so the hold is
//	  never dated earlier than the write went out)
//	→ wrapLock (tests only: fault injection)
//	→ Attempts.Lock (refuses the writes of an attempt ended by a release wake;
//	  inside the Guard so that a refused write never counts as a renewal)
//	→ pkg/layout's fencedLock (acquires only while this replica's Lease
//	  layout leads the group, renews only while no other does; inside the
//	  Guard for the same reason, and outside WatchedLock so that it sees
//	  what the elector sees)
//	→ WatchedLock (per-controller mode only: reads a Lease assigned
//	  elsewhere from its watch, not the API server, and shows a version
//	  held elsewhere as released once it has been unchanged for its
//	  LeaseDurationSeconds since the watch delivered it, which is the
//	  invariant's "seen unchanged"; writes pass)
//	→ RetryingRelease → client-go's LeaseLock.
package leaseguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// ErrLeaseNotHeld is wrapped by the error of every write the Guard refuses.
var ErrLeaseNotHeld = errors.New("this instance does not hold a fresh Lease")

var (
	refusedWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "controller_manager",
		Name:      "lease_guard_refused_writes_total",
		Help:      "Write requests refused because the Lease was not renewed within the renew deadline, per lease.",
	}, []string{"name"})
	registerOnce sync.Once
)

// Guard tracks one Lease's renewals.
type Guard struct {
	name          string
	renewDeadline time.Duration
	now           func() time.Time

	mu      sync.Mutex
	renewed time.Time // when the last successful acquire or renewal was sent; zero: not held

	// writing counts the writes the transport let through that have not
	// completed: while there are any, the connections send nothing past the
	// renew deadline (conn.go).
	writing atomic.Int64
	conn    connection
}

// New returns a Guard for the Lease called name, with the election's renew
// deadline. It holds nothing until Renewed is called.
func New(name string, renewDeadline time.Duration) *Guard {
	registerOnce.Do(func() { legacyregistry.MustRegister(refusedWrites) })
	refusedWrites.WithLabelValues(name)
	return &Guard{name: name, renewDeadline: renewDeadline, now: time.Now}
}

// Renewed records a successful acquire or renewal whose request was sent at
// sent. time.Now's monotonic reading is what makes this immune to clock
// steps.
func (g *Guard) Renewed(sent time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sent.After(g.renewed) {
		g.renewed = sent
	}
}

// Lost records that the Lease was lost or released: every write is refused
// from now on, until the next Renewed.
func (g *Guard) Lost() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.renewed = time.Time{}
}

// check returns nil when a write may be sent now, else an error wrapping
// ErrLeaseNotHeld. The transport asks remaining itself; tests ask this.
func (g *Guard) check() error {
	_, err := g.remaining()
	return err
}

// remaining returns how long writes may still be sent, or an error wrapping
// ErrLeaseNotHeld when they may not.
func (g *Guard) remaining() (time.Duration, error) {
	g.mu.Lock()
	renewed := g.renewed
	g.mu.Unlock()
	if renewed.IsZero() {
		return 0, fmt.Errorf("lease %s: %w (not leading)", g.name, ErrLeaseNotHeld)
	}
	age := g.now().Sub(renewed)
	if age > g.renewDeadline {
		return 0, fmt.Errorf("lease %s: %w (last renewed %s ago, renew deadline %s)",
			g.name, ErrLeaseNotHeld, age.Round(time.Millisecond), g.renewDeadline)
	}
	return g.renewDeadline - age, nil
}

// WrapTransport returns rt refusing writes (every method but GET, HEAD and
// OPTIONS) while Check fails, and cancelling a write it let through that
// has not completed when the renew deadline it was checked against passes:
// a write held up on its way (dialling an API server that is restarting,
// a pause mid-request) would otherwise reach the server after the Lease
// may have passed on. That cancellation runs on a timer, which a process
// resuming from a pause may run only after the request went out: so
// ClientConfig also sends on connections that stop at the deadline
// themselves (conn.go). Tests use WrapTransport alone.
func (g *Guard) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &guardedTransport{guard: g, next: rt}
}

type guardedTransport struct {
	guard *Guard
	next  http.RoundTripper
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	left, err := t.guard.remaining()
	if err != nil {
		refusedWrites.WithLabelValues(t.guard.name).Inc()
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper must close the body, even on error
		}
		return nil, fmt.Errorf("refusing %s %s: %w", req.Method, req.URL.Path, err)
	}
	expired := fmt.Errorf("lease %s: %w (a %s of %s not completed within the renew deadline %s)",
		t.guard.name, ErrLeaseNotHeld, req.Method, req.URL.Path, t.guard.renewDeadline)
	ctx, cancelCtx := context.WithTimeoutCause(req.Context(), left, expired)
	t.guard.writing.Add(1)
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			cancelCtx()
			t.guard.writing.Add(-1)
		})
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		if context.Cause(ctx) == expired {
			refusedWrites.WithLabelValues(t.guard.name).Inc()
			err = fmt.Errorf("%w: %w", expired, err)
		}
		cancel()
		return nil, err
	}
	// The response body is read after RoundTrip returns: the context ends
	// when it is closed.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose cancels a request's context when its response body is
// closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
