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
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// FilteredListerWatcher passes to an informer only the objects keep
// accepts, for what no label or field selector can select on the server
// (an annotation, a hash of the name): lists keep the matches; a watch
// drops events of objects that never matched, and turns the event of a
// cached object that stopped matching into a DELETED, so that it leaves
// the cache. BOOKMARK and ERROR events pass, and so does a streaming list
// (WatchListClient): its initial events are filtered like a list.
//
// It remembers the keys of the objects it passed: client-go's informers
// queue in a RealFIFO, which hands a DELETED of an object the informer
// never held to the handlers all the same.
type FilteredListerWatcher struct {
	inner cache.ListerWatcherWithContext
	keep  func(obj metav1.Object) bool
	// watchListUnsupported is the inner ListerWatcher's answer (a fake
	// clientset's), which the reflector asks the wrapper.
	watchListUnsupported bool

	mu sync.Mutex
	// passed are the keys of the objects the informer holds as far as
	// this wrapper knows: those passed since its last list, as the
	// reflector received them.
	passed map[string]struct{}
	// listed are the matches of the list in progress and its
	// resourceVersion; they become passed when the reflector watches from
	// that resourceVersion, the sign it stored that list.
	listed   map[string]struct{}
	listedRV string
}

// NewFilteredListerWatcher wraps lw (a client-go ListWatch, as the
// informer constructors build it) so that only objects keep accepts reach
// the informer. keep must decide from the object alone.
func NewFilteredListerWatcher(lw cache.ListerWatcher, keep func(obj metav1.Object) bool) *FilteredListerWatcher {
	return &FilteredListerWatcher{
		inner:                cache.ToListerWatcherWithContext(lw),
		keep:                 keep,
		watchListUnsupported: watchlist.DoesClientNotSupportWatchListSemantics(lw),
		passed:               map[string]struct{}{},
	}
}

// IsWatchListSemanticsUnSupported tells the reflector whether the wrapped
// client can stream lists, as the wrapped ListerWatcher would.
func (f *FilteredListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return f.watchListUnsupported
}

// List implements cache.ListerWatcher.
func (f *FilteredListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), options)
}

// Watch implements cache.ListerWatcher.
func (f *FilteredListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), options)
}

// ListWithContext lists one page and keeps its matching items.
func (f *FilteredListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	list, err := f.inner.ListWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, err
	}
	kept := make([]runtime.Object, 0, len(items))
	keys := make([]string, 0, len(items))
	for _, item := range items {
		obj, err := meta.Accessor(item)
		if err != nil || !f.keep(obj) {
			continue
		}
		kept = append(kept, item)
		keys = append(keys, objectKey(obj))
	}
	if err := meta.SetList(list, kept); err != nil {
		return nil, err
	}
	listMeta, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if options.Continue == "" { // the first page: a new list
		f.listed = map[string]struct{}{}
	}
	if f.listed == nil { // a later page of a list that was superseded
		return list, nil
	}
	for _, k := range keys {
		f.listed[k] = struct{}{}
	}
	f.listedRV = listMeta.GetResourceVersion()
	return list, nil
}

// WatchWithContext starts a watch whose events are filtered.
func (f *FilteredListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := f.inner.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	streaming := options.SendInitialEvents != nil && *options.SendInitialEvents
	f.mu.Lock()
	switch {
	case streaming:
		// The stream's initial events are a list: the reflector replaces
		// its store with them at the bookmark that ends them.
		f.listed = nil
	case f.listed != nil && f.listedRV == options.ResourceVersion:
		// The reflector stored the list and watches from its end. (A list
		// it only compared, the watch-list consistency check's, is taken
		// here only if nothing changed since, when it equals the store.)
		f.passed, f.listed = f.listed, nil
	default:
		f.listed = nil
	}
	f.mu.Unlock()
	fw := &filteredWatch{
		parent: f,
		inner:  w,
		out:    make(chan watch.Event),
		done:   make(chan struct{}),
	}
	if streaming {
		fw.initial = map[string]struct{}{}
	}
	go fw.run()
	return fw, nil
}

// filteredWatch is one watch of a FilteredListerWatcher.
type filteredWatch struct {
	parent *FilteredListerWatcher
	inner  watch.Interface
	out    chan watch.Event
	done   chan struct{}
	stop   sync.Once
	// initial collects the keys of a streaming list's initial events until
	// the bookmark that ends them; nil once they ended or for a plain watch.
	initial map[string]struct{}
}

func (w *filteredWatch) Stop() {
	w.stop.Do(func() {
		close(w.done)
		w.inner.Stop()
	})
}

func (w *filteredWatch) ResultChan() <-chan watch.Event {
	return w.out
}

func (w *filteredWatch) run() {
	defer close(w.out)
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-w.done:
			return
		case ev, ok = <-w.inner.ResultChan():
			if !ok {
				return
			}
		}
		out, record, pass := w.decide(ev)
		if !pass {
			continue
		}
		select {
		case <-w.done:
			return
		case w.out <- out:
			// Only an event the reflector took changes what it holds: one
			// left unread when it stopped this watch comes again in the next.
			record()
		}
	}
}

// decide says what becomes of ev: the event to pass, if any, and what to
// record once the reflector took it.
func (w *filteredWatch) decide(ev watch.Event) (out watch.Event, record func(), pass bool) {
	nothing := func() {}
	if ev.Type == watch.Error {
		return ev, nothing, true
	}
	obj, err := meta.Accessor(ev.Object)
	if err != nil {
		return ev, nothing, true // the reflector reports what it cannot read
	}
	if ev.Type == watch.Bookmark {
		if w.initial != nil && obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			initial := w.initial
			w.initial = nil
			return ev, func() { w.parent.setPassed(initial) }, true
		}
		return ev, nothing, true
	}

	key := objectKey(obj)
	keep := w.parent.keep(obj)
	if w.initial != nil { // a streaming list's initial events are ADDED only
		if !keep {
			return ev, nothing, false
		}
		return ev, func() { w.initial[key] = struct{}{} }, true
	}
	held := w.parent.holds(key)
	switch {
	case ev.Type == watch.Deleted && (held || keep):
		return ev, func() { w.parent.forget(key) }, true
	case ev.Type == watch.Deleted:
		return ev, nothing, false
	case keep: // ADDED or MODIFIED
		return ev, func() { w.parent.remember(key) }, true
	case held: // it stopped matching: it leaves the cache
		return watch.Event{Type: watch.Deleted, Object: ev.Object}, func() { w.parent.forget(key) }, true
	default:
		return ev, nothing, false
	}
}

func (f *FilteredListerWatcher) holds(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.passed[key]
	return ok
}

func (f *FilteredListerWatcher) remember(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.passed[key] = struct{}{}
}

func (f *FilteredListerWatcher) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.passed, key)
}

func (f *FilteredListerWatcher) setPassed(keys map[string]struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.passed = keys
}

// objectKey is the informer's key of obj.
func objectKey(obj metav1.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
