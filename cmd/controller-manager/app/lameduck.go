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
	"errors"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// lameDuck keeps the webhook and HTTP servers up after SIGTERM: the replica
// fails /readyz at once, so the kubelet and the endpoints stop routing to it,
// while it still answers the callers already routed here, each answer
// closing its connection (so that kept-alive callers reconnect elsewhere), for
// --shutdown-delay-duration and until the controllers have drained. Only then
// do the servers close, gracefully. Without it, callers get connection
// refused, which the API server does not retry.
type lameDuck struct {
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

// newLameDuck returns the lame duck of a manager shut down by ctx.
func newLameDuck(ctx context.Context, delay time.Duration) *lameDuck {
	serving, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &lameDuck{delay: delay, serving: serving, stop: stop}
	context.AfterFunc(ctx, func() {
		l.begin()
		l.mu.Lock()
		running := l.running
		l.mu.Unlock()
		if !running { // NewManager without Run: nothing to drain
			time.AfterFunc(delay, stop)
		}
	})
	return l
}

// begin marks the replica as shutting down, once, and calls onBegin.
func (l *lameDuck) begin() time.Time {
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

// whenBegun calls f once shutdown begins, or now if it has.
func (l *lameDuck) whenBegun(f func()) {
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

func (l *lameDuck) started() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = true
}

// check fails /readyz from the moment the replica starts shutting down.
func (l *lameDuck) check() healthz.HealthChecker {
	return healthz.NamedCheck("shutting-down", func(*http.Request) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.since.IsZero() {
			return errors.New("this replica is shutting down")
		}
		return nil
	})
}

// finish is called once the controllers have drained (or stopped after a
// lost Lease): it waits out what is left of the delay, then closes the
// servers and waits for their requests in flight.
func (l *lameDuck) finish(ctx context.Context) {
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
