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

// Package controller is the thin framework shared by every controller of this
// manager: a named typed workqueue that serves real changes first, the
// worker loop that drains it, event handlers that feed it and tell it each
// key's priority, a channel source for generic events, the Base every
// controller embeds, one generic child adapter that reads children from the
// cache and writes them with server-side apply, and a consistency store that
// holds a reconcile back until the informers have observed the previous
// one's writes. It sits directly on client-go; a reader who knows
// kubernetes/sample-controller should recognise every piece.
package controller

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/ndsl/controller-manager/pkg/controller/priorityqueue"
)

// Key identifies the object a reconcile is about: namespace (empty for
// cluster-scoped objects) and name.
type Key = cache.ObjectName

// Queue is the typed rate-limited workqueue every controller owns, with
// adds that say their priority. The event handlers below choose it.
type Queue = priorityqueue.Interface[Key]

// The priorities the event handlers give keys.
const (
	// PriorityLow is for keys that re-check what probably has not changed:
	// the initial list, resyncs, a new leader's pass over its cache.
	PriorityLow = priorityqueue.Low
	// PriorityHigh is for keys from a real change; it is what Add means.
	PriorityHigh = priorityqueue.High
)

// QueueKind chooses the queue's order (--controller-queue).
type QueueKind string

const (
	// PriorityQueue serves keys from real changes before the initial list,
	// resyncs and takeover passes; FIFO within a priority. The default.
	PriorityQueue QueueKind = "priority"
	// FIFOQueue is client-go's plain FIFO, which ignores priorities.
	FIFOQueue QueueKind = "fifo"
)

// QueueKinds are the values --controller-queue accepts.
var QueueKinds = []QueueKind{PriorityQueue, FIFOQueue}

// ValidateQueueKind reports an unknown kind; empty means PriorityQueue.
func ValidateQueueKind(kind QueueKind) error {
	switch kind {
	case "", PriorityQueue, FIFOQueue:
		return nil
	}
	names := make([]string, len(QueueKinds))
	for i, k := range QueueKinds {
		names[i] = string(k)
	}
	return fmt.Errorf("--controller-queue must be one of %s, got %q", strings.Join(names, ", "), kind)
}

// NewQueue returns a rate-limited priority queue with client-go's default
// controller rate limiter (per-item exponential backoff plus an overall
// token bucket). The name labels the workqueue_* metrics, so it must be
// unique per manager.
func NewQueue(name string) Queue { return NewQueueOfKind(name, PriorityQueue) }

// NewQueueOfKind is NewQueue with the order --controller-queue chose.
func NewQueueOfKind(name string, kind QueueKind) Queue {
	cfg := priorityqueue.Config[Key]{
		Name:        name,
		RateLimiter: workqueue.DefaultTypedControllerRateLimiter[Key](),
	}
	if kind == FIFOQueue {
		return priorityqueue.NewFIFO(cfg)
	}
	return priorityqueue.New(cfg)
}

// Batched returns q with its high-priority adds delayed by period, so that
// a burst of changes within the period costs one reconcile: one pending add
// per key, at the highest priority asked for. Low-priority adds (initial
// list, resyncs) are not delayed: they wait behind real changes anyway.
func Batched(q Queue, period time.Duration) Queue {
	return &batchedQueue{Queue: q, period: period, pending: map[Key]priorityqueue.Priority{}}
}

// batchedQueue delays with its own timers, not the queue's AddAfter:
// client-go's delaying queue counts every AddAfter in
// workqueue_retries_total, and a batched change is not a retry.
type batchedQueue struct {
	Queue
	period time.Duration

	mu      sync.Mutex
	pending map[Key]priorityqueue.Priority
}

func (q *batchedQueue) Add(key Key) { q.AddWithPriority(key, PriorityHigh) }

func (q *batchedQueue) AddWithPriority(key Key, p priorityqueue.Priority) {
	if p <= PriorityLow {
		q.Queue.AddWithPriority(key, p)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if queued, ok := q.pending[key]; ok {
		q.pending[key] = max(queued, p)
		return
	}
	q.pending[key] = p
	time.AfterFunc(q.period, func() {
		q.mu.Lock()
		p := q.pending[key]
		delete(q.pending, key)
		q.mu.Unlock()
		q.Queue.AddWithPriority(key, p) // a no-op once the queue is shut down
	})
}
