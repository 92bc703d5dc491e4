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
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Interface is client-go's typed rate-limiting queue, plus adds that say
// their priority. Add, AddAfter and AddRateLimited add at High.
type Interface[T comparable] interface {
	workqueue.TypedRateLimitingInterface[T]
	// AddWithPriority adds item at priority p. An item already queued at a
	// lower priority moves up (to the back of p's FIFO); one queued at a
	// higher priority stays where it is. An item being processed is
	// processed again after Done, at the highest priority asked for
	// meanwhile.
	AddWithPriority(item T, p Priority)
}

// Config configures a queue; every field is optional.
type Config[T comparable] struct {
	// Name labels the workqueue_* metrics and must be unique in the
	// process; an unnamed queue has no metrics.
	Name string
	// RateLimiter spaces out AddRateLimited; default: client-go's
	// DefaultTypedControllerRateLimiter.
	RateLimiter workqueue.TypedRateLimiter[T]
	// MetricsProvider replaces the provider registered with
	// workqueue.SetProvider (the process's /metrics) for the workqueue_*
	// metrics; workqueue_depth_by_priority is always the process's.
	MetricsProvider workqueue.MetricsProvider
	// Clock drives AddAfter and the metrics; default: the real clock.
	Clock clock.WithTicker
}

func (c Config[T]) withDefaults() Config[T] {
	if c.RateLimiter == nil {
		c.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[T]()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// New returns a priority queue.
func New[T comparable](cfg Config[T]) Interface[T] {
	cfg = cfg.withDefaults()
	levels := newLevels[T](newDepthGauges(cfg.Name))
	base := &prioritized[T]{
		Typed: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{
			Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock, Queue: levels,
		}),
		levels: levels,
	}
	return newRateLimited(cfg, base, base.AddWithPriority)
}

// NewFIFO returns client-go's plain FIFO queue behind the same interface:
// AddWithPriority ignores the priority. It is there to compare with.
func NewFIFO[T comparable](cfg Config[T]) Interface[T] {
	cfg = cfg.withDefaults()
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock,
	})
	return newRateLimited(cfg, base, func(item T, _ Priority) { base.Add(item) })
}

// newRateLimited stacks client-go's delaying and rate-limiting queues on
// base, which every add, delayed ones included, goes through.
func newRateLimited[T comparable](cfg Config[T], base workqueue.TypedInterface[T], addWithPriority func(T, Priority)) Interface[T] {
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock, Queue: base,
	})
	return &queue[T]{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(cfg.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[T]{Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock, DelayingQueue: delaying}),
		addWithPriority: addWithPriority,
	}
}

// queue is what New and NewFIFO return.
type queue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	addWithPriority func(T, Priority)
}

func (q *queue[T]) AddWithPriority(item T, p Priority) { q.addWithPriority(item, p) }

// ShutDownWithDrain waits for the items in flight, then also stops the
// delaying queue's goroutine, which client-go's drain leaves running (until
// its next 10 s heartbeat) and whose buffer an AddAfter racing with the
// drain could block on.
func (q *queue[T]) ShutDownWithDrain() {
	q.TypedRateLimitingInterface.ShutDownWithDrain()
	q.TypedRateLimitingInterface.ShutDown()
}

// prioritized is client-go's Typed queue over levels: every add records its
// priority, then goes through Typed.Add, which pushes or touches the item
// in levels (or, for an item in processing, leaves the request for the
// push that follows Done).
type prioritized[T comparable] struct {
	*workqueue.Typed[T]
	levels *levels[T]
}

// Add is an add at High; the delaying queue's adds come through it too.
func (q *prioritized[T]) Add(item T) { q.AddWithPriority(item, High) }

func (q *prioritized[T]) AddWithPriority(item T, p Priority) {
	if q.ShuttingDown() {
		// Typed drops it anyway; do not leave a request behind.
		return
	}
	q.levels.request(item, clamp(p))
	q.Typed.Add(item)
}
