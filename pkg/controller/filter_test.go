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
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const filterAnnotation = "test/keep"

func keepAnnotated(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[filterAnnotation]
	return ok
}

func testService(name, rv string, keep bool) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	if keep {
		svc.Annotations = map[string]string{filterAnnotation: ""}
	}
	return svc
}

func bookmark(rv string, initialEventsEnd bool) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if initialEventsEnd {
		svc.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return svc
}

// fakeServices serves a fixed list, in pages of one, and hands out the
// fake watches the test drives.
type fakeServices struct {
	mu      sync.Mutex
	list    []corev1.Service
	listRV  string
	watches chan *watch.FakeWatcher
	opts    []metav1.ListOptions
}

func newFakeServices(rv string, items ...*corev1.Service) *fakeServices {
	f := &fakeServices{listRV: rv, watches: make(chan *watch.FakeWatcher, 10)}
	for _, s := range items {
		f.list = append(f.list, *s)
	}
	return f
}

func (f *fakeServices) listerWatcher() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: f.listRV}}
			list.Items = slices.Clone(f.list)
			return list, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			f.mu.Lock()
			f.opts = append(f.opts, o)
			f.mu.Unlock()
			w := watch.NewFakeWithChanSize(10, false)
			f.watches <- w
			return w, nil
		},
	}
}

func (f *fakeServices) nextWatch(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-f.watches:
		return w
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("no watch started")
		return nil
	}
}

// received is what one event delivered: its type and the object's name.
type received struct {
	Type watch.EventType
	Name string
}

func receive(t *testing.T, w watch.Interface) received {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		if ev.Type == watch.Error {
			return received{Type: ev.Type}
		}
		return received{Type: ev.Type, Name: ev.Object.(*corev1.Service).Name}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("no event")
		return received{}
	}
}

func TestFilteredListerWatcherList(t *testing.T) {
	ctx := t.Context()
	fake := newFakeServices("10", testService("a", "1", true), testService("b", "2", false), testService("c", "3", true))
	lw := NewFilteredListerWatcher(fake.listerWatcher(), keepAnnotated)

	list, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.(*corev1.ServiceList).Items {
		names = append(names, s.Name)
	}
	if want := []string{"a", "c"}; !slices.Equal(names, want) {
		t.Fatalf("listed %v, want %v", names, want)
	}
	if rv := list.(*corev1.ServiceList).ResourceVersion; rv != "10" {
		t.Errorf("list resourceVersion %q, want 10", rv)
	}

	// The reflector watches from the list's end: the list is what it holds.
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fw := fake.nextWatch(t)
	steps := []struct {
		in   watch.Event
		want *received // nil: dropped
	}{
		{in: watch.Event{Type: watch.Added, Object: testService("d", "11", false)}},
		{in: watch.Event{Type: watch.Modified, Object: testService("b", "12", false)}},
		{in: watch.Event{Type: watch.Deleted, Object: testService("b", "13", false)}},
		{in: watch.Event{Type: watch.Modified, Object: testService("a", "14", true)}, want: &received{watch.Modified, "a"}},
		{in: watch.Event{Type: watch.Modified, Object: testService("a", "15", false)}, want: &received{watch.Deleted, "a"}},
		// Gone from the cache: its further changes are nobody's business.
		{in: watch.Event{Type: watch.Modified, Object: testService("a", "16", false)}},
		{in: watch.Event{Type: watch.Deleted, Object: testService("a", "17", false)}},
		{in: watch.Event{Type: watch.Added, Object: testService("e", "18", true)}, want: &received{watch.Added, "e"}},
		{in: watch.Event{Type: watch.Modified, Object: testService("d", "19", true)}, want: &received{watch.Modified, "d"}},
		{in: watch.Event{Type: watch.Bookmark, Object: bookmark("20", false)}, want: &received{watch.Bookmark, ""}},
		// Deleted as it stopped matching: the cache held it.
		{in: watch.Event{Type: watch.Deleted, Object: testService("c", "21", false)}, want: &received{watch.Deleted, "c"}},
		{in: watch.Event{Type: watch.Deleted, Object: testService("e", "22", true)}, want: &received{watch.Deleted, "e"}},
		{in: watch.Event{Type: watch.Error, Object: &metav1.Status{Message: "gone"}}, want: &received{watch.Error, ""}},
	}
	for i, s := range steps {
		fw.Action(s.in.Type, s.in.Object)
		if s.want == nil {
			continue
		}
		if got := receive(t, w); got != *s.want {
			t.Fatalf("step %d (%s): got %v, want %v", i, s.in.Type, got, *s.want)
		}
	}
	if got := lw.keys(); !slices.Equal(got, []string{"ns/d"}) {
		t.Errorf("holds %v, want [ns/d]", got)
	}
}

func TestFilteredListerWatcherStreamingList(t *testing.T) {
	ctx := t.Context()
	fake := newFakeServices("10")
	lw := NewFilteredListerWatcher(fake.listerWatcher(), keepAnnotated)
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fw := fake.nextWatch(t)
	steps := []struct {
		in   watch.Event
		want *received
	}{
		{in: watch.Event{Type: watch.Added, Object: testService("a", "1", true)}, want: &received{watch.Added, "a"}},
		{in: watch.Event{Type: watch.Added, Object: testService("b", "2", false)}},
		{in: watch.Event{Type: watch.Bookmark, Object: bookmark("10", true)}, want: &received{watch.Bookmark, ""}},
		{in: watch.Event{Type: watch.Modified, Object: testService("b", "11", false)}},
		{in: watch.Event{Type: watch.Modified, Object: testService("b", "12", true)}, want: &received{watch.Modified, "b"}},
		{in: watch.Event{Type: watch.Modified, Object: testService("a", "13", false)}, want: &received{watch.Deleted, "a"}},
		{in: watch.Event{Type: watch.Modified, Object: testService("b", "14", false)}, want: &received{watch.Deleted, "b"}},
		{in: watch.Event{Type: watch.Deleted, Object: testService("b", "15", false)}},
	}
	for i, s := range steps {
		fw.Action(s.in.Type, s.in.Object)
		if s.want == nil {
			continue
		}
		if got := receive(t, w); got != *s.want {
			t.Fatalf("step %d (%s): got %v, want %v", i, s.in.Type, got, *s.want)
		}
	}
}

// An event the reflector never read, its watch stopped, changed nothing:
// the next watch, from the last resourceVersion it read, carries it again.
func TestFilteredListerWatcherUnreadEvent(t *testing.T) {
	ctx := t.Context()
	fake := newFakeServices("10", testService("a", "1", true))
	lw := NewFilteredListerWatcher(fake.listerWatcher(), keepAnnotated)
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	fake.nextWatch(t).Action(watch.Modified, testService("a", "11", false))
	// Give the filter time to decide; the reflector reads nothing.
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
		return false, nil
	}); err == nil {
		t.Fatal("poll ended")
	}
	w.Stop()

	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fake.nextWatch(t).Action(watch.Modified, testService("a", "11", false))
	if got, want := receive(t, w), (received{watch.Deleted, "a"}); got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A list the reflector did not store (a later watch from another
// resourceVersion) does not replace what it holds.
func TestFilteredListerWatcherListNotStored(t *testing.T) {
	ctx := t.Context()
	fake := newFakeServices("10", testService("a", "1", true))
	lw := NewFilteredListerWatcher(fake.listerWatcher(), keepAnnotated)
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	fake.nextWatch(t)

	fake.mu.Lock()
	fake.list, fake.listRV = nil, "20"
	fake.mu.Unlock()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "15", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
		t.Fatal(err)
	}
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "12"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fake.nextWatch(t).Action(watch.Modified, testService("a", "13", false))
	if got, want := receive(t, w), (received{watch.Deleted, "a"}); got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// noWatchList is a ListerWatcher that cannot stream lists, as a fake
// clientset's: the reflector lists.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// Through a real informer, listing or streaming: its store and its handlers
// see exactly the matching objects, and no delete of one they never had.
func TestFilteredListerWatcherInformer(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			testFilteredInformer(t, streaming)
		})
	}
}

func testFilteredInformer(t *testing.T, streaming bool) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	initial := []*corev1.Service{testService("a", "1", true), testService("b", "2", false)}
	fake := newFakeServices("10", initial...)
	var lw cache.ListerWatcher = noWatchList{fake.listerWatcher()}
	if streaming {
		lw = fake.listerWatcher()
	}
	filtered := NewFilteredListerWatcher(lw, keepAnnotated)
	if got := filtered.IsWatchListSemanticsUnSupported(); got == streaming {
		t.Fatalf("IsWatchListSemanticsUnSupported() = %v, want %v", got, !streaming)
	}
	informer := cache.NewSharedIndexInformer(filtered, &corev1.Service{}, 0, cache.Indexers{})
	var mu sync.Mutex
	var seen []string
	note := func(what string, obj any) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, what+" "+obj.(*corev1.Service).Name)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note("add", obj) },
		UpdateFunc: func(_, obj any) { note("update", obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			note("delete", obj)
		},
	}); err != nil {
		t.Fatal(err)
	}
	go informer.RunWithContext(ctx)
	fw := fake.nextWatch(t)
	if streaming {
		for _, s := range initial {
			fw.Add(s)
		}
		fw.Action(watch.Bookmark, bookmark("10", true))
	}
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	fake.mu.Lock()
	if got := fake.opts[0].SendInitialEvents != nil; got != streaming {
		t.Errorf("the informer streamed its list: %v, want %v", got, streaming)
	}
	fake.mu.Unlock()
	fw.Modify(testService("b", "11", false)) // never matched: dropped
	fw.Add(testService("c", "12", false))    // never matched: dropped
	fw.Modify(testService("b", "13", true))  // moved into the filter
	fw.Modify(testService("a", "14", false)) // moved out of it
	fw.Delete(testService("c", "15", false)) // never matched: dropped
	fw.Modify(testService("b", "16", false)) // moved out of it
	fw.Modify(testService("b", "17", false)) // already out
	fw.Add(testService("d", "18", true))     // a match
	want := []string{"add a", "add b", "delete a", "delete b", "add d"}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= len(want), nil
	}); err != nil {
		t.Fatalf("handlers saw %v, want %v", seen, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, want) {
		t.Fatalf("handlers saw %v, want %v", seen, want)
	}
	if keys := informer.GetStore().ListKeys(); !slices.Equal(keys, []string{"ns/d"}) {
		t.Errorf("store holds %v, want [ns/d]", keys)
	}
}

// keys lists what the wrapper believes the informer holds, sorted.
func (f *FilteredListerWatcher) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.passed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
