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

// Package priorityqueue is a typed work queue that serves keys from real
// changes before keys from the initial list, resyncs and takeover passes.
//
// It is client-go's queue, not a new one: client-go's Typed queue keeps the
// contract (a key is queued at most once; a key re-added while it is being
// processed is processed again after Done; ShutDown and ShutDownWithDrain;
// the workqueue_* metrics through the registered provider), its delaying
// queue provides AddAfter and its rate-limiting queue AddRateLimited,
// Forget and NumRequeues. This package supplies only the storage order,
// through the workqueue.Queue hook: one FIFO per priority, and the priority
// each add asked for. So controllers use it as a
// workqueue.TypedRateLimitingInterface unchanged, and shutdown is client-go's
// (Get never blocks once the queue is shut down and empty, adds after
// shutdown are dropped, nothing is handed over on a channel that could be
// left without a reader, which is where controller-runtime's priority queue
// had its shutdown bugs).
package priorityqueue

import "strconv"

// Priority orders keys: a key of a higher priority is served first; within
// a priority, keys are served in the order they were queued.
type Priority int

const (
	// Low is for keys that re-check what is probably unchanged: the
	// informer's initial list, periodic resyncs, a new leader's pass over
	// its cache.
	Low Priority = iota
	// High is for keys from a real change (a create, an update with a new
	// resourceVersion, a delete, a child's change) and for retries and
	// delayed adds. It is what Add means.
	High

	numPriorities = int(High) + 1
)

// String is the value of the priority label of workqueue_depth_by_priority.
func (p Priority) String() string {
	switch p {
	case Low:
		return "low"
	case High:
		return "high"
	default:
		return strconv.Itoa(int(p))
	}
}

// clamp maps any value onto a known priority, so a caller's mistake cannot
// lose a key.
func clamp(p Priority) Priority {
	return min(max(p, Low), High)
}
