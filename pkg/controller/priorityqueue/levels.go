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
	"container/list"
	"sync"
)

// levels is the storage under client-go's Typed queue (workqueue.Queue):
// one FIFO per priority. Typed calls Push, Touch, Pop and Len under its own
// lock; request is called before Typed.Add, outside that lock, hence mu.
type levels[T comparable] struct {
	mu sync.Mutex
	// fifos[p] holds the queued keys of priority p, oldest first.
	fifos [numPriorities]list.List
	// queued finds a queued key's element, and so its priority.
	queued map[T]queuedAt
	// requested is the highest priority asked for by adds of a key that
	// Typed has not yet pushed or touched. Taking the highest means that
	// of two adds racing for one key, the high one always wins.
	requested map[T]Priority
	// peak is the most keys queued since queued was made: a Go map keeps
	// its size after a burst drains, so a queue emptied after holding many
	// keys (a convergence, a resync) gets new maps.
	peak int
	// depth reports the length of each FIFO; nil for an unnamed queue.
	depth *depthGauges
}

type queuedAt struct {
	priority Priority
	element  *list.Element
}

func newLevels[T comparable](depth *depthGauges) *levels[T] {
	l := &levels[T]{queued: map[T]queuedAt{}, requested: map[T]Priority{}, depth: depth}
	l.report()
	return l
}

// request records that the next add of item asks for priority p.
func (l *levels[T]) request(item T, p Priority) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.requested[item]; !ok || p > cur {
		l.requested[item] = p
	}
}

// take returns and forgets the priority requested for item.
func (l *levels[T]) take(item T) (Priority, bool) {
	p, ok := l.requested[item]
	delete(l.requested, item)
	return p, ok
}

// Push queues item at the priority its add requested.
func (l *levels[T]) Push(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.take(item)
	if !ok {
		// Every add goes through request; this is only a safe default.
		p = High
	}
	l.queued[item] = queuedAt{priority: p, element: l.fifos[p].PushBack(item)}
	l.peak = max(l.peak, len(l.queued))
	l.report()
}

// shrinkAbove is the peak above which an emptied queue gets new maps.
const shrinkAbove = 1024

// shrinkIfDrained gives an emptied queue new maps once it held many keys.
func (l *levels[T]) shrinkIfDrained() {
	if len(l.queued) > 0 || l.peak <= shrinkAbove {
		return
	}
	l.queued, l.peak = map[T]queuedAt{}, 0
	if len(l.requested) == 0 {
		l.requested = map[T]Priority{}
	}
}

// Touch is called when item, already queued, is added again: a higher
// priority moves it to the back of that priority's FIFO; an equal or lower
// one leaves it where it is.
func (l *levels[T]) Touch(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.take(item)
	at, queued := l.queued[item]
	if !ok || !queued || p <= at.priority {
		return
	}
	l.fifos[at.priority].Remove(at.element)
	l.queued[item] = queuedAt{priority: p, element: l.fifos[p].PushBack(item)}
	l.report()
}

// Pop returns the oldest key of the highest non-empty priority. Typed calls
// it only when Len is positive.
func (l *levels[T]) Pop() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := numPriorities - 1; p >= 0; p-- {
		if front := l.fifos[p].Front(); front != nil {
			item := l.fifos[p].Remove(front).(T)
			delete(l.queued, item)
			l.shrinkIfDrained()
			l.report()
			return item
		}
	}
	var zero T
	return zero
}

// Len is the number of queued keys, all priorities together.
func (l *levels[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queued)
}

// lens returns the length of each FIFO, for tests and metrics.
func (l *levels[T]) lens() [numPriorities]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n [numPriorities]int
	for p := range l.fifos {
		n[p] = l.fifos[p].Len()
	}
	return n
}

// report sets the depth gauges; l.mu is held.
func (l *levels[T]) report() {
	if l.depth == nil {
		return
	}
	for p := range l.fifos {
		l.depth.set(Priority(p), l.fifos[p].Len())
	}
}
