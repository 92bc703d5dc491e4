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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A blocker's watch requeues its owners when the blocker goes, and is
// dropped then; past the bound, owners are requeued later instead.
func TestBlockerWatches(t *testing.T) {
	ctx := context.Background()
	q := NewQueue("blockers-test")
	defer q.ShutDown()
	b := NewBlockerWatches(q, 1)
	fake := watch.NewFake()
	var opts metav1.ListOptions
	watchFn := func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
		opts = o
		return fake, nil
	}
	blocker := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "user", ResourceVersion: "5"}}
	first, second := Key{Namespace: "ns", Name: "web"}, Key{Namespace: "ns", Name: "other"}
	b.blocked(ctx, corev1.Resource("services"), blocker, first, watchFn)
	b.blocked(ctx, corev1.Resource("services"), blocker, second, watchFn) // the same blocker: one watch
	if n := b.Len(); n != 1 {
		t.Fatalf("%d watches, want 1", n)
	}
	// An unrelated change (a label) does not unblock.
	relabelled := blocker.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	fake.Modify(relabelled)
	if q.Len() != 0 {
		t.Fatalf("queued %d keys on a change that unblocks nothing", q.Len())
	}
	if opts.FieldSelector != "metadata.name=web" || opts.ResourceVersion != "5" {
		t.Errorf("watch options %+v, want the blocker alone from the resourceVersion read", opts)
	}

	// Past the bound: no watch, a later requeue.
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "x"}}
	b.blocked(ctx, corev1.Resource("services"), other, Key{Namespace: "ns", Name: "db"}, watchFn)
	if n := b.Len(); n != 1 {
		t.Fatalf("%d watches past the bound of 1", n)
	}

	fake.Delete(blocker)
	deadline := time.Now().Add(10 * time.Second)
	for q.Len() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if q.Len() < 2 {
		t.Fatalf("queued %d keys after the blocker was deleted, want both owners", q.Len())
	}
	for b.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.Len(); n != 0 {
		t.Errorf("%d watches left after the blocker went", n)
	}
}

// Stop ends the watches with the controller that started them, and the
// fallback delays remembered past the bound stay bounded (issue 36).
func TestBlockerWatchesStopAndBoundedRetries(t *testing.T) {
	ctx := context.Background()
	q := NewQueue("blockers-stop-test")
	defer q.ShutDown()
	b := NewBlockerWatches(q, 2)
	watchCtx := make(chan context.Context, 1)
	watchFn := func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
		watchCtx <- ctx
		return watch.NewFake(), nil
	}
	blocker := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "user"}}
	}
	b.blocked(ctx, corev1.Resource("services"), blocker("a"), Key{Namespace: "ns", Name: "a"}, watchFn)
	b.blocked(ctx, corev1.Resource("services"), blocker("b"), Key{Namespace: "ns", Name: "b"}, watchFn)
	// Past the bound: owners get fallback delays, never more than the bound.
	for i := range 10 {
		name := string(rune('c' + i))
		b.blocked(ctx, corev1.Resource("services"), blocker(name), Key{Namespace: "ns", Name: name}, watchFn)
	}
	b.mu.Lock()
	retries := len(b.retries)
	b.mu.Unlock()
	if retries > 2 {
		t.Errorf("%d fallback delays remembered, want at most the bound, 2", retries)
	}

	first := <-watchCtx
	b.Stop()
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a blocker's watch outlived Stop")
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.Len(); n != 0 {
		t.Errorf("%d watches left after Stop", n)
	}
	b.blocked(ctx, corev1.Resource("services"), blocker("late"), Key{Namespace: "ns", Name: "late"}, watchFn)
	if n := b.Len(); n != 0 {
		t.Errorf("a stopped BlockerWatches started a watch")
	}
}
