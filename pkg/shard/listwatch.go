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

package shard

import (
	"context"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// ListerWatcher is what NewListerWatcher returns: a cache.ListerWatcher
// for an informer, which also tells where its range is selected.
type ListerWatcher struct {
	outer     cache.ListerWatcher
	outerCtx  cache.ListerWatcherWithContext
	selecting *selectingListerWatcher
	// watchListUnsupported is the wrapped ListerWatcher's answer, which the
	// reflector asks the outermost wrapper.
	watchListUnsupported bool
	dropped              atomic.Int64
}

var _ cache.ListerWatcherWithContext = &ListerWatcher{}

// NewListerWatcher wraps lw, the ListWatch of one resource, so that an
// informer over it holds only shard s's range by key k, and reports where
// the range is selected. With one shard it passes everything through
// unchanged: --shards=1 lists and watches as before.
//
// Every list and watch asks the API server for the range (ShardSelector),
// and the client filters every answer by the same range all the same. The
// filter costs a hash per object received, and it keeps the cache right
// whatever the server did: a server without the gate ignores the selector
// silently, replicas of a highly available control plane may differ, and a
// key such as ControllerOwner cannot be selected on the server at all. Where
// the server selected, the filter drops nothing (shard_client_filtered_total
// stays 0).
//
// lw should be the plain ListWatch (label selector and all): the probe
// lists through it, which another client-side filter, with state of what it
// passed, should not see. Put such filters outside, around the result.
//
// resource names the resource in logs and metrics, e.g. "apps".
func NewListerWatcher(lw cache.ListerWatcher, s Shard, k Key, resource string) *ListerWatcher {
	l := &ListerWatcher{outer: lw, watchListUnsupported: watchlist.DoesClientNotSupportWatchListSemantics(lw)}
	if s.Count > 1 {
		l.selecting = &selectingListerWatcher{
			inner:                cache.ToListerWatcherWithContext(lw),
			watchListUnsupported: l.watchListUnsupported,
			shard:                s,
			key:                  k,
			resource:             resource,
		}
		keeps := s.Keeps(k)
		filtered := clientFiltered.WithLabelValues(resource)
		l.outer = controller.NewFilteredListerWatcher(l.selecting, func(obj metav1.Object) bool {
			if keeps(obj) {
				return true
			}
			l.dropped.Add(1)
			filtered.Inc()
			return false
		})
	}
	l.outerCtx = cache.ToListerWatcherWithContext(l.outer)
	return l
}

// List implements cache.ListerWatcher.
func (l *ListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.outer.List(options)
}

// Watch implements cache.ListerWatcher.
func (l *ListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.outer.Watch(options)
}

// ListWithContext implements cache.ListerWatcherWithContext.
func (l *ListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	return l.outerCtx.ListWithContext(ctx, options)
}

// WatchWithContext implements cache.ListerWatcherWithContext.
func (l *ListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	return l.outerCtx.WatchWithContext(ctx, options)
}

// IsWatchListSemanticsUnSupported answers as the wrapped ListerWatcher would.
func (l *ListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return l.watchListUnsupported
}

// Path returns where the range is selected: PathServer or PathClient once
// the first list or watch probed, "" before, and "" for a single shard,
// which selects nothing.
func (l *ListerWatcher) Path() string {
	if l.selecting == nil {
		return ""
	}
	return l.selecting.path()
}

// Dropped returns how many objects and events of other shards the client
// filter dropped: what the API server sent but did not have to.
func (l *ListerWatcher) Dropped() int64 {
	return l.dropped.Load()
}

// selectingListerWatcher adds the shard selector to every list and watch,
// and probes once where the range is selected.
type selectingListerWatcher struct {
	inner cache.ListerWatcherWithContext
	// watchListUnsupported is the inner ListerWatcher's answer, which the
	// reflector asks the outermost wrapper.
	watchListUnsupported bool
	shard                Shard
	key                  Key
	resource             string

	mu sync.Mutex
	// selected is where the range is selected, "" until a probe succeeded.
	selected string
}

var _ cache.ListerWatcherWithContext = &selectingListerWatcher{}

// IsWatchListSemanticsUnSupported answers as the wrapped ListerWatcher would.
func (l *selectingListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return l.watchListUnsupported
}

// List implements cache.ListerWatcher.
func (l *selectingListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), options)
}

// Watch implements cache.ListerWatcher.
func (l *selectingListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), options)
}

// ListWithContext lists the shard's range.
func (l *selectingListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	l.probeOnce(ctx)
	options.ShardSelector = l.shard.Selector(l.key)
	return l.inner.ListWithContext(ctx, options)
}

// WatchWithContext watches the shard's range, a streaming list's initial
// events included.
func (l *selectingListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	l.probeOnce(ctx)
	options.ShardSelector = l.shard.Selector(l.key)
	return l.inner.WatchWithContext(ctx, options)
}

// probeOnce finds out where the range is selected, at the informer's first
// list or watch, and logs and records it. A probe that failed, or could not
// tell for want of objects, is tried again at the next list or watch; it
// changes nothing else, since the client filters in either case.
func (l *selectingListerWatcher) probeOnce(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.selected != "" {
		return
	}
	logger := klog.FromContext(ctx)
	path, err := Probe(ctx, l.inner, l.key)
	if err != nil {
		logger.Error(err, "Probing the API server for shard selection", "resource", l.resource, "shard", l.shard)
		return
	}
	if path == "" {
		logger.V(2).Info("Shard selection unknown until there are objects; probing again at the next list or watch", "resource", l.resource, "shard", l.shard)
		return
	}
	l.selected = path
	recordPath(l.resource, l.shard, path)
	logger.Info("Shard range selected", "resource", l.resource, "shard", l.shard, "key", l.key,
		"path", path, "selector", l.shard.Selector(l.key))
}

// path returns where the range is selected, "" before a successful probe.
func (l *selectingListerWatcher) path() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.selected
}
