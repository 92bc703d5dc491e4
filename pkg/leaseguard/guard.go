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
// have passed to someone else: a Guard per Lease, stamped by its lock
// wrapper, checked by its clients' transport and connections. The
// invariant it keeps, with the argument why it holds, is on the HA layer's
// page: pkg/ha's package documentation ("Who may write when").
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
