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
	"math/rand/v2"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fieldselector "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// DefaultMaxBlockerWatches bounds the watches one controller keeps on
// blockers; past it, blocked owners are requeued with a bounded backoff.
const DefaultMaxBlockerWatches = 300

const (
	// blockerWatchTimeout ends a blocker's watch (jittered up to twice
	// this): the owners are requeued then, and a still-blocked owner
	// watches again; one that converged or went away does not.
	blockerWatchTimeout = 5 * time.Minute
	// The fallback requeue past the bound, doubled per try up to the max.
	blockerRetryMin = 5 * time.Second
	blockerRetryMax = 2 * time.Minute
)

// BlockerWatches watches the objects that block a child: same-name objects
// the owner does not control. The children's informers are selected by
// ManagedByLabel, so such an object is not in any cache; one watch per
// blocker, on that object alone, requeues its blocked owners as soon as it
// is deleted, replaced, or changes controller, which are the only changes
// that can unblock them.
type BlockerWatches struct {
	queue Queue
	max   int
	// ctx bounds every watch; Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	watches map[blockerKey]*blockerWatch
	// retries are the fallback delays of owners blocked past max, at most
	// max of them: past that they start over.
	retries map[Key]time.Duration
}

type blockerKey struct {
	resource  schema.GroupResource
	namespace string
	name      string
}

type blockerWatch struct {
	owners map[Key]struct{}
}

// NewBlockerWatches returns the blocker watches of the controller whose
// queue is queue, keeping at most max watches (DefaultMaxBlockerWatches
// when max ≤ 0).
func NewBlockerWatches(queue Queue, max int) *BlockerWatches {
	if max <= 0 {
		max = DefaultMaxBlockerWatches
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &BlockerWatches{queue: queue, max: max, ctx: ctx, cancel: cancel,
		watches: map[blockerKey]*blockerWatch{}, retries: map[Key]time.Duration{}}
}

// Stop ends every watch (Base.Track calls it when the controller stops):
// they would otherwise requeue into a dead queue for up to
// 2×blockerWatchTimeout. Blocked owners are found again by the next
// controller's reconciles.
func (b *BlockerWatches) Stop() {
	b.cancel()
	b.mu.Lock()
	clear(b.retries)
	b.mu.Unlock()
}

// Len is the number of blockers watched.
func (b *BlockerWatches) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.watches)
}

// blocked registers that blocker, as read at its resourceVersion, blocks
// owner. watchFn watches the blocker's kind in its namespace. It starts a
// watch on that one object unless one runs already; past the bound it
// requeues owner later instead.
func (b *BlockerWatches) blocked(ctx context.Context, resource schema.GroupResource, blocker metav1.Object, owner Key,
	watchFn func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)) {
	key := blockerKey{resource: resource, namespace: blocker.GetNamespace(), name: blocker.GetName()}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.watches[key]; ok {
		w.owners[owner] = struct{}{}
		return
	}
	if b.ctx.Err() != nil {
		return // stopped with its controller
	}
	if len(b.watches) >= b.max {
		if _, ok := b.retries[owner]; !ok && len(b.retries) >= b.max {
			clear(b.retries)
		}
		delay := min(max(2*b.retries[owner], blockerRetryMin), blockerRetryMax)
		b.retries[owner] = delay
		b.queue.AddAfter(owner, delay)
		klog.FromContext(ctx).V(2).Info("Too many blockers watched, requeueing the owner later", "resource", resource, "blocker", klog.KObj(blocker), "after", delay)
		return
	}
	delete(b.retries, owner)
	w := &blockerWatch{owners: map[Key]struct{}{owner: {}}}
	b.watches[key] = w
	// The watch outlives the reconcile that found the blocker, not the
	// controller; it ends by itself (event, error or timeout) or with Stop
	// and always requeues the owners then.
	watchCtx := klog.NewContext(b.ctx, klog.FromContext(ctx))
	go b.watch(watchCtx, key, blocker.GetUID(), controllerUID(blocker), blocker.GetResourceVersion(), watchFn)
}

// watch follows one blocker from resourceVersion until it stops blocking
// (deleted, replaced, another controller) or the watch ends, then requeues
// its owners and forgets it.
func (b *BlockerWatches) watch(ctx context.Context, key blockerKey, uid, controller types.UID, resourceVersion string,
	watchFn func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)) {
	defer b.release(key)
	timeout := blockerWatchTimeout + time.Duration(rand.Int64N(int64(blockerWatchTimeout)))
	w, err := watchFn(ctx, metav1.ListOptions{
		FieldSelector:   fieldselector.OneTermEqualSelector("metadata.name", key.name).String(),
		ResourceVersion: resourceVersion,
		TimeoutSeconds:  ptr.To(int64(timeout.Seconds())),
	})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not watch a blocker; requeueing its owners", "resource", key.resource, "blocker", klog.KRef(key.namespace, key.name), "err", err)
		return
	}
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.ResultChan():
			if !ok {
				return
			}
			ev = e
		}
		switch ev.Type {
		case watch.Deleted, watch.Error:
			return
		case watch.Added, watch.Modified:
			obj, ok := objectMeta(ev.Object)
			if !ok || obj.GetUID() != uid || controllerUID(obj) != controller {
				return
			}
		}
	}
}

// release forgets the blocker and requeues the owners it blocked.
func (b *BlockerWatches) release(key blockerKey) {
	b.mu.Lock()
	w := b.watches[key]
	delete(b.watches, key)
	b.mu.Unlock()
	if w == nil {
		return
	}
	for owner := range w.owners {
		b.queue.Add(owner)
	}
}
