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

package priorityqueue

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestQueue(t *testing.T) Interface[string] {
	t.Helper()
	q := New(Config[string]{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond)})
	t.Cleanup(q.ShutDown)
	return q
}

// getAll pops every queued item, marking each done, in the order served.
func getAll(t *testing.T, q Interface[string]) []string {
	t.Helper()
	var got []string
	for q.Len() > 0 {
		item, shutdown := q.Get()
		if shutdown {
			t.Fatal("Get reported shutdown while items were queued")
		}
		q.Done(item)
		got = append(got, item)
	}
	return got
}

func expectOrder(t *testing.T, q Interface[string], want ...string) {
	t.Helper()
	if got := getAll(t, q); !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHighJumpsAheadOfLowBacklog(t *testing.T) {
	q := newTestQueue(t)
	for _, k := range []string{"b1", "b2", "b3"} {
		q.AddWithPriority(k, Low)
	}
	q.AddWithPriority("fresh", High)
	q.Add("plain") // Add means High
	expectOrder(t, q, "fresh", "plain", "b1", "b2", "b3")
}

func TestFIFOIgnoresPriority(t *testing.T) {
	q := NewFIFO(Config[string]{})
	defer q.ShutDown()
	for _, k := range []string{"b1", "b2", "b3"} {
		q.AddWithPriority(k, Low)
	}
	q.AddWithPriority("fresh", High)
	expectOrder(t, q, "b1", "b2", "b3", "fresh")
}

func TestPromotionAndNoDemotion(t *testing.T) {
	q := newTestQueue(t)
	q.AddWithPriority("a", Low)
	q.AddWithPriority("b", Low)
	q.AddWithPriority("c", Low)
	q.AddWithPriority("h", High)
	q.AddWithPriority("b", High) // promoted, behind h
	q.AddWithPriority("h", Low)  // stays high, keeps its place
	q.AddWithPriority("a", Low)  // same priority: keeps its place
	if q.Len() != 4 {
		t.Fatalf("Len = %d, want 4: a key is queued once", q.Len())
	}
	expectOrder(t, q, "h", "b", "a", "c")
}

func TestOutOfRangePriorityIsClamped(t *testing.T) {
	q := newTestQueue(t)
	q.AddWithPriority("low", Priority(-7))
	q.AddWithPriority("high", Priority(42))
	expectOrder(t, q, "high", "low")
}

func TestReAddWhileProcessing(t *testing.T) {
	q := newTestQueue(t)
	q.AddWithPriority("a", Low)
	item, _ := q.Get()
	q.AddWithPriority("a", Low) // while processing: not queued twice, not served concurrently
	q.AddWithPriority("a", High)
	q.AddWithPriority("b", Low)
	if q.Len() != 1 {
		t.Fatalf("Len = %d while a is processing, want 1 (b only)", q.Len())
	}
	q.Done(item)
	// a comes back at the highest priority asked for while it was processed.
	expectOrder(t, q, "a", "b")
}

func TestReAddWhileProcessingKeepsLowPriority(t *testing.T) {
	q := newTestQueue(t)
	q.AddWithPriority("a", High)
	item, _ := q.Get()
	q.AddWithPriority("b", Low)
	q.AddWithPriority("a", Low)
	q.Done(item)
	expectOrder(t, q, "b", "a")
}

func TestRateLimitedRetries(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := New(Config[string]{Clock: clk, RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)})
	defer q.ShutDown()
	q.AddWithPriority("backlog", Low)
	q.AddRateLimited("retry")
	q.AddRateLimited("retry")
	if n := q.NumRequeues("retry"); n != 2 {
		t.Fatalf("NumRequeues = %d, want 2", n)
	}
	if q.Len() != 1 {
		t.Fatalf("Len = %d before the backoff, want 1", q.Len())
	}
	clk.Step(time.Second) // the first backoff: 1s
	waitFor(t, "the retry to be queued", func() bool { return q.Len() == 2 })
	// A retry comes back at High: it is a change not yet done.
	expectOrder(t, q, "retry", "backlog")
	q.Forget("retry")
	if n := q.NumRequeues("retry"); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", n)
	}
}

func TestAddAfter(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := New(Config[string]{Clock: clk})
	defer q.ShutDown()
	q.AddAfter("later", time.Minute)
	q.AddAfter("now", 0)
	if q.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (only the undelayed item)", q.Len())
	}
	waitFor(t, "the delaying queue to take the item", func() bool { return clk.HasWaiters() })
	clk.Step(time.Minute)
	waitFor(t, "the delayed item", func() bool { return q.Len() == 2 })
	expectOrder(t, q, "now", "later")
}

func TestGetAfterShutDownNeverBlocks(t *testing.T) {
	// controller-runtime#3239: with items queued at shutdown, a second Get blocked forever.
	q := newTestQueue(t)
	q.Add("a")
	q.ShutDown()
	q.Add("ignored") // adds after shutdown are dropped
	done := make(chan []string)
	go func() {
		var got []string
		for range 3 {
			item, shutdown := q.Get()
			if shutdown {
				break
			}
			got = append(got, item)
			q.Done(item)
		}
		done <- got
	}()
	select {
	case got := <-done:
		if !slices.Equal(got, []string{"a"}) {
			t.Fatalf("after shutdown Get served %v, want [a] then shutdown", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get blocked after ShutDown")
	}
	if !q.ShuttingDown() {
		t.Fatal("ShuttingDown = false after ShutDown")
	}
}

func TestShutDownWakesBlockedGet(t *testing.T) {
	q := newTestQueue(t)
	done := make(chan bool)
	go func() {
		_, shutdown := q.Get()
		done <- shutdown
	}()
	q.ShutDown() // whether or not Get is already waiting

	select {
	case shutdown := <-done:
		if !shutdown {
			t.Fatal("Get returned an item from an empty queue")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ShutDown did not wake a blocked Get")
	}
}

func TestShutDownWithDrainWaitsForItemsInFlight(t *testing.T) {
	q := newTestQueue(t)
	q.Add("a")
	item, _ := q.Get()
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	waitFor(t, "the queue to shut down", q.ShuttingDown)
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned with an item in flight")
	case <-time.After(50 * time.Millisecond): // a window to see it return too early
	}
	q.Done(item)
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("ShutDownWithDrain did not return after Done")
	}
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("Get after drain did not report shutdown")
	}
}

// client-go's drain leaves the delaying queue's goroutine waiting for its
// next heartbeat; on a fake clock, that is forever.
func TestShutDownWithDrainStopsTheDelayingQueue(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := New(Config[string]{Clock: clk})
	q.AddAfter("later", time.Hour)
	waitFor(t, "the delaying queue to wait for the item", func() bool { return waitingLoop() == "select" })
	q.ShutDownWithDrain()
	waitFor(t, "the delaying queue's goroutine to end", func() bool { return waitingLoop() == "" })
}

// waitingLoop returns the state of the delaying queue's goroutine ("" when
// there is none); the tests before have stopped theirs.
func waitingLoop() string {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, ").waitingLoop(") {
			header, _, _ := strings.Cut(g, "\n")
			_, state, _ := strings.Cut(header, "[")
			state, _, _ = strings.Cut(state, "]")
			state, _, _ = strings.Cut(state, ",")
			return state
		}
	}
	return ""
}

func TestShutDownEndsDrain(t *testing.T) {
	q := newTestQueue(t)
	q.Add("a")
	q.Get() // never Done
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	waitFor(t, "the queue to shut down", q.ShuttingDown)
	q.ShutDown()
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("ShutDown did not end ShutDownWithDrain")
	}
}
