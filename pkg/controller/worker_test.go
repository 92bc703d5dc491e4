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

package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"

	"github.com/ndsl/controller-manager/pkg/controller/priorityqueue"
)

func fastQueue() Queue {
	return priorityqueue.New(priorityqueue.Config[Key]{
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[Key](time.Millisecond, 5*time.Millisecond),
	})
}

// calls records how often each key was reconciled.
type calls struct {
	mu sync.Mutex
	n  map[Key]int
}

func (c *calls) inc(k Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[Key]int{}
	}
	c.n[k]++
	return c.n[k]
}

func (c *calls) get(k Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func runWorker(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, 2); close(done) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("worker did not stop")
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestWorkerForgetsOnSuccess(t *testing.T) {
	q := fastQueue()
	var c calls
	key := Key{Namespace: "ns", Name: "ok"}
	w := &Worker{Name: "test-success", Queue: q, Reconcile: func(_ context.Context, k Key) (Result, error) {
		c.inc(k)
		return Result{}, nil
	}}
	stop := runWorker(t, w)
	defer stop()
	q.Add(key)
	waitFor(t, "one reconcile", func() bool { return c.get(key) == 1 })
	waitFor(t, "queue drained", func() bool { return q.Len() == 0 })
	if n := q.NumRequeues(key); n != 0 {
		t.Errorf("NumRequeues after success = %d, want 0", n)
	}
}

func TestWorkerRequeuesErrorsWithBackoffThenSucceeds(t *testing.T) {
	q := fastQueue()
	var c calls
	key := Key{Name: "flaky"}
	w := &Worker{Name: "test-retry", Queue: q, Reconcile: func(_ context.Context, k Key) (Result, error) {
		if c.inc(k) < 3 {
			return Result{}, errors.New("not yet")
		}
		return Result{}, nil
	}}
	stop := runWorker(t, w)
	defer stop()
	q.Add(key)
	waitFor(t, "three reconciles", func() bool { return c.get(key) == 3 })
	waitFor(t, "requeues forgotten", func() bool { return q.NumRequeues(key) == 0 })
}

func TestWorkerGivesUpAfterMaxRetries(t *testing.T) {
	q := fastQueue()
	var c calls
	var gaveUp atomic.Int32
	key := Key{Name: "broken"}
	w := &Worker{
		Name: "test-giveup", Queue: q, MaxRetries: 3,
		Reconcile: func(_ context.Context, k Key) (Result, error) {
			c.inc(k)
			return Result{}, errors.New("always fails")
		},
		OnGiveUp: func(_ context.Context, k Key, err error) {
			if k == key && err != nil {
				gaveUp.Add(1)
			}
		},
	}
	stop := runWorker(t, w)
	defer stop()
	q.Add(key)
	waitFor(t, "give up", func() bool { return gaveUp.Load() == 1 })
	// One first try plus MaxRetries retries, and nothing after giving up.
	if n := c.get(key); n != 4 {
		t.Errorf("reconciles = %d, want 4", n)
	}
	if q.NumRequeues(key) != 0 || q.Len() != 0 {
		t.Errorf("dropped key still tracked: requeues=%d len=%d", q.NumRequeues(key), q.Len())
	}
}

func TestWorkerRecoversPanicsAndRequeues(t *testing.T) {
	q := fastQueue()
	var c calls
	key := Key{Name: "panicky"}
	w := &Worker{Name: "test-panic", Queue: q, Reconcile: func(_ context.Context, k Key) (Result, error) {
		if c.inc(k) == 1 {
			var m map[string]int
			m["boom"] = 1 // nil map write panics
		}
		return Result{}, nil
	}}
	stop := runWorker(t, w)
	defer stop()
	q.Add(key)
	waitFor(t, "retry after panic", func() bool { return c.get(key) == 2 })
}

func TestWorkerRequeueAfter(t *testing.T) {
	q := fastQueue()
	var c calls
	key := Key{Name: "periodic"}
	w := &Worker{Name: "test-after", Queue: q, Reconcile: func(_ context.Context, k Key) (Result, error) {
		if c.inc(k) == 1 {
			return Result{RequeueAfter: 20 * time.Millisecond}, nil
		}
		return Result{}, nil
	}}
	stop := runWorker(t, w)
	defer stop()
	start := time.Now()
	q.Add(key)
	waitFor(t, "second reconcile", func() bool { return c.get(key) == 2 })
	if elapsed := time.Since(start); elapsed < 20*time.Millisecond {
		t.Errorf("requeued after %s, want at least 20ms", elapsed)
	}
	if q.NumRequeues(key) != 0 {
		t.Errorf("RequeueAfter counted as a failure")
	}
}

func TestWorkerGracefulStopFinishesInFlightAndTakesNoNewWork(t *testing.T) {
	q := fastQueue()
	started := make(chan struct{})
	release := make(chan struct{})
	var finished, others atomic.Int32
	slow := Key{Name: "slow"}
	w := &Worker{Name: "test-shutdown", Queue: q, Reconcile: func(ctx context.Context, k Key) (Result, error) {
		if k != slow {
			others.Add(1)
			return Result{}, nil
		}
		close(started)
		<-release
		if ctx.Err() != nil {
			t.Errorf("in-flight reconcile's context was cancelled by a graceful stop")
		}
		finished.Add(1)
		return Result{}, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain := make(chan struct{})
	done := make(chan struct{})
	go func() { w.Run(WithGracefulStop(ctx, drain), 1); close(done) }()
	q.Add(slow)
	<-started
	q.Add(Key{Name: "queued-1"})
	q.Add(Key{Name: "queued-2"})
	close(drain)
	select {
	case <-done:
		t.Fatal("Run returned while a reconcile was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
	if finished.Load() != 1 {
		t.Errorf("in-flight reconcile did not finish")
	}
	if n := others.Load(); n != 0 {
		t.Errorf("%d queued keys were reconciled after shutdown began", n)
	}
}

// Cancelling the context (the Lease is lost) must cancel the reconciles in
// flight at once, not let them go on writing until a timeout.
func TestWorkerCancelAbortsReconcilesInFlight(t *testing.T) {
	q := fastQueue()
	started := make(chan struct{})
	var others atomic.Int32
	slow := Key{Name: "slow"}
	w := &Worker{Name: "test-cancel", Queue: q, Reconcile: func(ctx context.Context, k Key) (Result, error) {
		if k != slow {
			others.Add(1)
			return Result{}, nil
		}
		close(started)
		<-ctx.Done() // a reconcile blocked in a request
		return Result{}, ctx.Err()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, 1); close(done) }()
	q.Add(slow)
	<-started
	q.Add(Key{Name: "queued"})
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was cancelled: the reconcile in flight was not cancelled")
	}
	if n := others.Load(); n != 0 {
		t.Errorf("%d queued keys were reconciled after the cancel", n)
	}
}

// A reconcile that writes, fails, is held back by the consistency store and
// fails again must still back off and reach MaxRetries: waiting for the
// informers must not reset the key's failure count.
func TestWorkerConsistencyWaitKeepsBackoff(t *testing.T) {
	store, _, _ := newTestConsistencyStore(t)
	q := fastQueue()
	key := Key{Namespace: "shop", Name: "web"}
	owner := ownerWithUID("owner-uid")
	var attempts atomic.Int32
	gaveUp := make(chan struct{})
	w := &Worker{Name: "test-wait-backoff", Queue: q, MaxRetries: 5,
		Reconcile: func(ctx context.Context, k Key) (Result, error) {
			if err := store.Check(ctx, k); err != nil {
				store.Clear(k, "") // the informers catch up meanwhile
				return Result{}, err
			}
			attempts.Add(1)
			// A write the informers have not observed yet, then a failure.
			store.Wrote(owner, servicesResource, serviceAt("web", "u1", "100"))
			return Result{}, errors.New("quota exceeded")
		},
		OnGiveUp: func(context.Context, Key, error) { close(gaveUp) },
	}
	stop := runWorker(t, w)
	defer stop()
	q.Add(key)
	select {
	case <-gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatalf("key never given up after %d failed attempts: consistency waits reset its backoff", attempts.Load())
	}
}
