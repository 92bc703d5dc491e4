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
	"sync"
	"time"

	"github.com/ndsl/controller-manager/pkg/controller/priorityqueue"
)

// standbyQueue holds the keys a controller's event handlers queue before it
// runs (a warm standby, or the moments between build and Run) outside its
// workqueue, and hands them over when it starts to run. Until then they
// count in controller_manager_standby_pending_keys, not in workqueue_depth:
// an operator alerting on workqueue_depth means work piling up that a
// worker should be doing, and summing it over replicas should count the
// leader's backlog once, not once more per standby.
type standbyQueue struct {
	Queue
	name string

	mu      sync.Mutex
	running bool
	order   []Key // first-add order
	pending map[Key]priorityqueue.Priority
}

func newStandbyQueue(name string, q Queue) *standbyQueue {
	RegisterMetrics()
	standbyPendingKeys.WithLabelValues(name).Set(0)
	return &standbyQueue{Queue: q, name: name, pending: map[Key]priorityqueue.Priority{}}
}

func (q *standbyQueue) Add(key Key) { q.AddWithPriority(key, PriorityHigh) }

// AddAfter and AddRateLimited come from workers, which do not run on a
// standby; held back keys lose nothing by waiting without their delay.
func (q *standbyQueue) AddAfter(key Key, d time.Duration) {
	if !q.hold(key, PriorityHigh) {
		q.Queue.AddAfter(key, d)
	}
}

func (q *standbyQueue) AddRateLimited(key Key) {
	if !q.hold(key, PriorityHigh) {
		q.Queue.AddRateLimited(key)
	}
}

func (q *standbyQueue) AddWithPriority(key Key, p priorityqueue.Priority) {
	if !q.hold(key, p) {
		q.Queue.AddWithPriority(key, p)
	}
}

// hold keeps key while the controller does not run, once per key at the
// highest priority asked for, and reports whether it did.
func (q *standbyQueue) hold(key Key, p priorityqueue.Priority) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running {
		return false
	}
	if queued, ok := q.pending[key]; ok {
		q.pending[key] = max(queued, p)
		return true
	}
	q.pending[key] = p
	q.order = append(q.order, key)
	standbyPendingKeys.WithLabelValues(q.name).Set(float64(len(q.order)))
	return true
}

// run hands the held keys to the workqueue, in the order they came, and
// lets every later add through.
func (q *standbyQueue) run() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running {
		return
	}
	q.running = true
	for _, key := range q.order {
		q.Queue.AddWithPriority(key, q.pending[key])
	}
	q.order, q.pending = nil, nil
	standbyPendingKeys.WithLabelValues(q.name).Set(0)
}

// Len counts the held keys too: /debug/controllers shows what a standby
// would start with.
func (q *standbyQueue) Len() int {
	q.mu.Lock()
	held := len(q.order)
	q.mu.Unlock()
	return held + q.Queue.Len()
}

// ShutDown also drops the keys still queued, and those held by a
// controller that never ran. Nobody takes them any more (a controller runs
// once), but client-go's workqueue_depth, one series per queue name, would
// count them for good on top of the queue rebuilt under the same name
// after a lost Lease. A worker still holding a key is not disturbed: Get
// after ShutDown hands out only what is queued; a key its Done re-queues is
// dropped by Base.Run's ShutDown once the workers stopped.
func (q *standbyQueue) ShutDown() {
	q.mu.Lock()
	q.running = true
	q.order, q.pending = nil, nil
	standbyPendingKeys.WithLabelValues(q.name).Set(0)
	q.mu.Unlock()
	q.Queue.ShutDown()
	for {
		key, shutdown := q.Queue.Get()
		if shutdown {
			return
		}
		q.Queue.Forget(key)
		q.Queue.Done(key)
	}
}
