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
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func drain(q Queue) []Key {
	var keys []Key
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		keys = append(keys, k)
	}
	return keys
}

func svc(name, rv string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func ownedDeployment(name, rv, ownerAPIVersion, ownerKind, ownerName string) *appsv1.Deployment {
	yes := true
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, ResourceVersion: rv,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: ownerAPIVersion, Kind: ownerKind, Name: ownerName, UID: types.UID(ownerName), Controller: &yes,
		}},
	}}
}

func TestEnqueueObject(t *testing.T) {
	q := fastQueue()
	h := EnqueueObject(q)
	h.OnAdd(svc("a", "1"), false)
	h.OnUpdate(svc("b", "1"), svc("b", "1")) // resyncs of the primary resource are kept
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: svc("c", "1")})
	h.OnDelete("not an object") // ignored, no panic
	got := drain(q)
	// The resync (b) is kept, behind the real changes.
	want := []Key{{Namespace: "ns", Name: "a"}, {Namespace: "ns", Name: "c"}, {Namespace: "ns", Name: "b"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestEnqueueControllerOf(t *testing.T) {
	q := fastQueue()
	h := EnqueueControllerOf(q, schema.GroupKind{Group: "ingress.example.com", Kind: "App"}, false)
	h.OnAdd(ownedDeployment("d1", "1", "ingress.example.com/v1beta1", "App", "app1"), false)
	h.OnAdd(ownedDeployment("d2", "1", "apps/v1", "ReplicaSet", "rs"), false) // other kind: ignored
	h.OnAdd(svc("no-owner", "1"), false)                                      // no owner: ignored
	h.OnUpdate(ownedDeployment("d1", "5", "ingress.example.com/v1beta1", "App", "app1"),
		ownedDeployment("d1", "5", "ingress.example.com/v1beta1", "App", "app1")) // resync: skipped
	h.OnDelete(cache.DeletedFinalStateUnknown{Obj: ownedDeployment("d3", "1", "ingress.example.com/v1", "App", "app3")})
	got := drain(q)
	want := []Key{{Namespace: "ns", Name: "app1"}, {Namespace: "ns", Name: "app3"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}

	cluster := EnqueueControllerOf(q, schema.GroupKind{Group: "distri-infer.ndsl.cn", Kind: "Pipeline"}, true)
	cluster.OnAdd(ownedDeployment("step", "1", "distri-infer.ndsl.cn/v1beta1", "Pipeline", "p"), false)
	if got := drain(q); len(got) != 1 || got[0] != (Key{Name: "p"}) {
		t.Fatalf("cluster-scoped owner: got %v, want [p]", got)
	}
}

func TestEnqueueMappedReachesOldAndNewTargets(t *testing.T) {
	q := fastQueue()
	h := EnqueueMapped(q, func(o metav1.Object) []Key {
		return []Key{{Name: o.GetLabels()["target"]}}
	})
	oldObj, newObj := svc("a", "1"), svc("a", "2")
	oldObj.Labels = map[string]string{"target": "old"}
	newObj.Labels = map[string]string{"target": "new"}
	h.OnUpdate(oldObj, newObj)
	got := drain(q)
	if len(got) != 2 || got[0].Name != "old" || got[1].Name != "new" {
		t.Fatalf("got %v, want [old new]", got)
	}
}

func TestEnqueueUnblocked(t *testing.T) {
	q := fastQueue()
	h := EnqueueUnblocked(q, func(o metav1.Object) []Key {
		return []Key{{Namespace: o.GetNamespace(), Name: "owner-of-" + o.GetName()}}
	})
	h.OnAdd(svc("added", "1"), false)                  // a new blocker unblocks nothing
	h.OnUpdate(svc("edited", "1"), svc("edited", "2")) // nor does an edit that keeps the controller
	released := ownedDeployment("released", "1", "apps/v1", "ReplicaSet", "rs")
	h.OnUpdate(released, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "released", ResourceVersion: "2"}})
	h.OnDelete(cache.DeletedFinalStateUnknown{Obj: svc("deleted", "1")})
	got := drain(q)
	want := []Key{{Namespace: "ns", Name: "owner-of-released"}, {Namespace: "ns", Name: "owner-of-deleted"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestTrySendDoesNotBlockAndForwardEvents(t *testing.T) {
	ch := make(chan Key, 1)
	if !TrySend(ch, Key{Name: "tick"}) {
		t.Fatal("first send into an empty channel failed")
	}
	if TrySend(ch, Key{Name: "tick"}) {
		t.Fatal("second send into a full channel should have been dropped")
	}
	q := fastQueue()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ForwardEvents(ctx, ch, q); close(done) }()
	waitFor(t, "forwarded key", func() bool { return q.Len() == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ForwardEvents did not stop with its context")
	}
}

// The controllers rely on metav1.IsControlledBy matching the owner by UID.
func TestIsControlledBy(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "app1", UID: "app1"}
	other := &metav1.ObjectMeta{Name: "app1", UID: "recycled"}
	d := ownedDeployment("d", "1", "ingress.example.com/v1beta1", "App", "app1")
	if !metav1.IsControlledBy(d, owner) {
		t.Error("controlled object not recognised")
	}
	if metav1.IsControlledBy(d, other) {
		t.Error("same name, other UID must not count as owner")
	}
	if metav1.IsControlledBy(svc("x", "1"), owner) {
		t.Error("object without owner references counted as controlled")
	}
}

// The handlers, not the controllers, decide priorities: keys from real
// changes are served before the initial list and resyncs.
func TestHandlersGiveRealChangesPriority(t *testing.T) {
	q := fastQueue()
	h := EnqueueObject(q)
	h.OnAdd(svc("listed1", "1"), true)
	h.OnAdd(svc("listed2", "1"), true)
	h.OnUpdate(svc("resynced", "3"), svc("resynced", "3"))
	h.OnAdd(svc("created", "4"), false)
	h.OnUpdate(svc("changed", "5"), svc("changed", "6"))
	h.OnDelete(svc("deleted", "7"))
	h.OnUpdate(svc("listed2", "1"), svc("listed2", "8")) // a change to a listed key promotes it

	children := EnqueueControllerOf(q, schema.GroupKind{Group: "ingress.example.com", Kind: "App"}, false)
	children.OnAdd(ownedDeployment("d1", "1", "ingress.example.com/v1beta1", "App", "listed-owner"), true)
	children.OnUpdate(ownedDeployment("d2", "1", "ingress.example.com/v1beta1", "App", "child-changed"),
		ownedDeployment("d2", "2", "ingress.example.com/v1beta1", "App", "child-changed"))

	var got []string
	for _, k := range drain(q) {
		got = append(got, k.Name)
	}
	want := []string{"created", "changed", "deleted", "listed2", "child-changed", "listed1", "resynced", "listed-owner"}
	if !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}

func TestFIFOQueueKindIgnoresPriorities(t *testing.T) {
	q := NewQueueOfKind("", FIFOQueue)
	defer q.ShutDown()
	h := EnqueueObject(q)
	h.OnAdd(svc("listed", "1"), true)
	h.OnAdd(svc("created", "2"), false)
	if got := drain(q); len(got) != 2 || got[0].Name != "listed" {
		t.Fatalf("FIFO served %v, want listed first", got)
	}
}

func TestValidateQueueKind(t *testing.T) {
	for _, ok := range []QueueKind{"", PriorityQueue, FIFOQueue} {
		if err := ValidateQueueKind(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	err := ValidateQueueKind("lifo")
	if err == nil || err.Error() != `--controller-queue must be one of priority, fifo, got "lifo"` {
		t.Errorf("lifo: got %v", err)
	}
}

func TestBatchedDelaysChangesNotTheInitialList(t *testing.T) {
	q := fastQueue()
	defer q.ShutDown()
	const period = 50 * time.Millisecond
	bq := Batched(q, period)
	bq.AddWithPriority(Key{Name: "listed"}, PriorityLow)
	if q.Len() != 1 {
		t.Fatal("an initial-list key was delayed")
	}
	start := time.Now()
	for range 3 {
		bq.AddWithPriority(Key{Name: "p"}, PriorityHigh)
		bq.Add(Key{Name: "p"})
	}
	if q.Len() != 1 {
		t.Fatal("a change was not delayed")
	}
	waitFor(t, "the delayed key", func() bool { return q.Len() == 2 })
	if time.Since(start) < period {
		t.Errorf("arrived after %s, want at least the period", time.Since(start))
	}
	// One waiting entry per key, and the delayed change comes back at High.
	if got := drain(q); len(got) != 2 || got[0].Name != "p" || got[1].Name != "listed" {
		t.Errorf("served %v, want [p listed]: six changes in one period make one reconcile, ahead of the initial list", got)
	}
}
