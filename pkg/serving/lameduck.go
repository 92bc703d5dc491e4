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

// Package serving is what the manager's servers share: a lame duck that
// keeps them answering, unready, through a shutdown delay; the HTTP server
// of probes and metrics; and its secure serving (a reloading certificate,
// delegated authentication and authorization).
package serving

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// LameDuck keeps the webhook and HTTP servers up after SIGTERM: the replica
// fails /readyz at once, so the kubelet and the endpoints stop routing to it,
// while it still answers the callers already routed here, each answer
// closing its connection (so that kept-alive callers reconnect elsewhere), for
// --shutdown-delay-duration and until the controllers have drained. Only then
// do the servers close, gracefully. Without it, callers get connection
// refused, which the API server does not retry.
type LameDuck struct {
	delay time.Duration
	// serving is the servers' context; stop ends it.
	serving context.Context
	stop    context.CancelFunc
	// stopped are closed once each server has shut down.
	stopped []<-chan struct{}

	mu sync.Mutex
	// since is when the replica started to shut down; zero before.
	since time.Time
	// onBegin are called once shutdown begins.
	onBegin []func()
	// running is set once Run has started, which then ends the servers itself.
	running bool
}

// NewLameDuck returns the lame duck of a manager shut down by ctx, which
// serves for delay after ctx is done.
func NewLameDuck(ctx context.Context, delay time.Duration) *LameDuck {
	serving, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &LameDuck{delay: delay, serving: serving, stop: stop}
	context.AfterFunc(ctx, func() {
		l.begin()
		l.mu.Lock()
		running := l.running
		l.mu.Unlock()
		if !running { // never Started: nothing to drain
			time.AfterFunc(delay, stop)
		}
	})
	return l
}

// begin marks the replica as shutting down, once, and calls onBegin.
func (l *LameDuck) begin() time.Time {
	l.mu.Lock()
	var begun []func()
	if l.since.IsZero() {
		l.since = time.Now()
		begun, l.onBegin = l.onBegin, nil
	}
	since := l.since
	l.mu.Unlock()
	for _, f := range begun {
		f()
	}
	return since
}

// WhenBegun calls f once shutdown begins, or now if it has.
func (l *LameDuck) WhenBegun(f func()) {
	l.mu.Lock()
	begun := !l.since.IsZero()
	if !begun {
		l.onBegin = append(l.onBegin, f)
	}
	l.mu.Unlock()
	if begun {
		f()
	}
}

// Started says the manager runs, and calls Finish itself once it has
// drained.
func (l *LameDuck) Started() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = true
}

// Check fails /readyz from the moment the replica starts shutting down.
func (l *LameDuck) Check() healthz.HealthChecker {
	return healthz.NamedCheck("shutting-down", func(*http.Request) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.since.IsZero() {
			return errors.New("this replica is shutting down")
		}
		return nil
	})
}

// Finish is called once the controllers have drained (or stopped after a
// lost Lease): it waits out what is left of the delay, then closes the
// servers and waits for their requests in flight.
func (l *LameDuck) Finish(ctx context.Context) {
	logger := klog.FromContext(ctx)
	since := l.begin()
	if left := time.Until(since.Add(l.delay)); left > 0 {
		logger.Info("Still serving webhooks, unready, for the rest of the shutdown delay", "left", left.Round(time.Millisecond))
		time.Sleep(left)
	}
	l.stop()
	for _, done := range l.stopped {
		<-done
	}
	logger.Info("Servers stopped", "afterShutdownBegan", time.Since(since).Round(time.Millisecond))
}

// Serving is the servers' context: it ends when they must close.
func (l *LameDuck) Serving() context.Context { return l.serving }

// AddStopped makes Finish wait for stopped, closed once a server has shut
// down.
func (l *LameDuck) AddStopped(stopped <-chan struct{}) { l.stopped = append(l.stopped, stopped) }

// Stop closes the servers now: a manager that failed to start.
func (l *LameDuck) Stop() { l.stop() }
