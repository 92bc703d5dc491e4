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
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

var servicesResource = schema.GroupResource{Resource: "services"}

func serviceAt(name, uid, rv string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

func ownerWithUID(uid string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID(uid)}}
}

// newTestConsistencyStore returns a store over one Service store that
// already holds an object at resourceVersion 10, and its clock.
func newTestConsistencyStore(t *testing.T) (*ConsistencyStore, cache.Store, *time.Time) {
	t.Helper()
	services := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := services.Add(serviceAt("other", "u0", "10")); err != nil {
		t.Fatal(err)
	}
	if services.LastStoreSyncResourceVersion() == "" {
		// Every write would then count as observed at once.
		t.Fatal("client-go's AtomicFIFO feature is off: stores keep no resource version")
	}
	s := NewConsistencyStore(map[schema.GroupResource]cache.Store{servicesResource: services}, time.Minute)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	return s, services, &now
}

var web = Key{Namespace: "shop", Name: "web"}

func TestConsistencyStoreWrites(t *testing.T) {
	ctx := context.Background()
	s, services, _ := newTestConsistencyStore(t)
	owner := ownerWithUID("owner-uid")

	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("an owner without writes waits: %v", d)
	}
	// A create at resourceVersion 12 is observed once the store reaches 12,
	// whichever object brought it there.
	s.Wrote(owner, servicesResource, serviceAt("web", "u1", "12"))
	if d := s.Check(ctx, web); !IsTransient(d) {
		t.Fatalf("unobserved write: Check = %v, want a transient NotObservedError", d)
	}
	_ = services.Add(serviceAt("web", "u1", "11"))
	if s.Check(ctx, web) == nil {
		t.Fatal("store at 11 counted as having observed a write at 12")
	}
	_ = services.Update(serviceAt("other", "u0", "12"))
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("store at 12: Check = %v, want 0", d)
	}

	// An older write recorded after a newer one does not lower the bar.
	s.Wrote(owner, servicesResource, serviceAt("web", "u1", "20"))
	s.Wrote(owner, servicesResource, serviceAt("other", "u0", "15"))
	_ = services.Update(serviceAt("other", "u0", "15"))
	if s.Check(ctx, web) == nil {
		t.Fatal("store at 15 counted as having observed a write at 20")
	}
	_ = services.Update(serviceAt("web", "u1", "20"))
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("store at 20: Check = %v, want 0", d)
	}

	// Writes of resources without a store, or with resource versions that
	// cannot be compared, hold nobody back.
	s.Wrote(owner, schema.GroupResource{Group: "apps", Resource: "deployments"}, serviceAt("web", "u1", "99"))
	s.Wrote(owner, servicesResource, serviceAt("web", "u1", "not-a-number"))
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("untracked or incomparable writes: Check = %v, want 0", d)
	}
}

func TestConsistencyStoreDeletes(t *testing.T) {
	ctx := context.Background()
	s, services, _ := newTestConsistencyStore(t)
	owner := ownerWithUID("owner-uid")
	_ = services.Add(serviceAt("web", "u1", "11"))

	// A delete is observed once the store no longer holds that object.
	s.Deleted(owner, servicesResource, serviceAt("web", "u1", "11"))
	if s.Check(ctx, web) == nil {
		t.Fatal("delete counted as observed while the store still holds the object")
	}
	_ = services.Delete(serviceAt("web", "u1", "13"))
	_ = services.Add(serviceAt("web", "u2", "14")) // a new object of the same name is another object
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("deleted object gone from the store: Check = %v, want 0", d)
	}

	// A finalizer keeps the object, marked for deletion: the store has
	// observed the delete all the same.
	s.Deleted(owner, servicesResource, serviceAt("web", "u2", "14"))
	terminating := serviceAt("web", "u2", "15")
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	terminating.Finalizers = []string{"example.com/cleanup"}
	_ = services.Update(terminating)
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("deleted object terminating in the store: Check = %v, want 0", d)
	}
}

func TestConsistencyStoreTimeout(t *testing.T) {
	ctx := context.Background()
	s, _, now := newTestConsistencyStore(t)
	owner := ownerWithUID("owner-uid")

	// Writes never observed hold the owner back until the timeout, counted
	// from the last write, and are then dropped.
	s.Wrote(owner, servicesResource, serviceAt("web", "u1", "99"))
	*now = now.Add(40 * time.Second)
	s.Wrote(owner, servicesResource, serviceAt("web", "u1", "98"))
	*now = now.Add(59*time.Second + 500*time.Millisecond)
	var notObserved *NotObservedError
	if d := s.Check(ctx, web); !errors.As(d, &notObserved) || notObserved.For != 59*time.Second+500*time.Millisecond {
		t.Fatalf("Check = %v, want not observed for 59.5s", d)
	}
	*now = now.Add(time.Second)
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("expired writes: Check = %v, want 0", d)
	}
	if len(s.owners) != 0 {
		t.Errorf("expired writes kept: %v", s.owners)
	}
}

func TestConsistencyStoreOwnerRecreated(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newTestConsistencyStore(t)

	// A new owner of the same name does not inherit the old one's writes.
	s.Wrote(ownerWithUID("old-uid"), servicesResource, serviceAt("web", "u1", "99"))
	s.Wrote(ownerWithUID("new-uid"), servicesResource, serviceAt("web", "u2", "5"))
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("new owner waits for its predecessor's write: %v", d)
	}

	// Clear with another owner's UID keeps the writes; with the owner's UID,
	// or none, it drops them.
	s.Wrote(ownerWithUID("new-uid"), servicesResource, serviceAt("web", "u2", "99"))
	s.Clear(web, "old-uid")
	if s.Check(ctx, web) == nil {
		t.Fatal("clearing the old owner dropped the new owner's writes")
	}
	s.Clear(web, "new-uid")
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("cleared owner still waits: %v", d)
	}
	s.Wrote(ownerWithUID("new-uid"), servicesResource, serviceAt("web", "u2", "99"))
	s.Clear(web, "")
	if d := s.Check(ctx, web); d != nil {
		t.Fatalf("cleared owner still waits: %v", d)
	}
}
