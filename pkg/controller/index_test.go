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
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// serviceOwnedBy is a Service with one owner reference to uid.
func serviceOwnedBy(name string, uid types.UID, isController bool) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	if uid != "" {
		svc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: uid, Controller: ptr.To(isController)}}
	}
	return svc
}

// ownerKind is the kind of serviceOwnedBy's owner.
var ownerKind = schema.GroupKind{Kind: "ConfigMap"}

func TestControllerIndex(t *testing.T) {
	controlled := serviceOwnedBy("controlled", "owner-uid", true)
	otherKind := serviceOwnedBy("other-kind", "owner-uid", true)
	otherKind.OwnerReferences[0].Kind = "Secret"
	otherGroup := serviceOwnedBy("other-group", "owner-uid", true)
	otherGroup.OwnerReferences[0].APIVersion = "example.com/v1"
	_, index := ControllerIndex(ownerKind)
	cases := []struct {
		name string
		obj  any
		want []string
	}{
		{"controlled", controlled, []string{"owner-uid"}},
		{"owned, not controlled", serviceOwnedBy("owned", "owner-uid", false), nil},
		{"no owner", serviceOwnedBy("orphan", "", false), nil},
		{"a tombstone of a controlled object", cache.DeletedFinalStateUnknown{Key: "shop/controlled", Obj: controlled}, []string{"owner-uid"}},
		{"a tombstone of something else", cache.DeletedFinalStateUnknown{Key: "shop/x", Obj: "not an object"}, nil},
		{"not an object", 42, nil},
		{"metadata only", &metav1.PartialObjectMetadata{ObjectMeta: controlled.ObjectMeta}, []string{"owner-uid"}},
		{"controlled by another kind", otherKind, nil},
		{"controlled by the kind of another group", otherGroup, nil},
	}
	for _, tc := range cases {
		got, err := index(tc.obj)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: index = %v, %v; want %v, nil", tc.name, got, err, tc.want)
		}
	}
}

// Controllers sharing an informer, or one rebuilt on it, each add the same
// index: the second time is no error, and an index added to an informer that
// already holds objects indexes them.
func TestAddIndexersTwice(t *testing.T) {
	informer := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Services().Informer()
	if err := informer.GetIndexer().Add(serviceOwnedBy("before", "owner-uid", true)); err != nil {
		t.Fatal(err)
	}
	other := func(any) ([]string, error) { return nil, nil }
	name, index := ControllerIndex(ownerKind)
	if err := AddIndexers(informer, cache.Indexers{name: index}); err != nil {
		t.Fatalf("first AddIndexers: %v", err)
	}
	if err := AddIndexers(informer, cache.Indexers{name: index, "other": other}); err != nil {
		t.Fatalf("AddIndexers with one index already there: %v", err)
	}
	if err := AddIndexers(informer, cache.Indexers{name: index, "other": other}); err != nil {
		t.Fatalf("AddIndexers with both there: %v", err)
	}
	for _, name := range []string{name, "other", cache.NamespaceIndex} {
		if _, ok := informer.GetIndexer().GetIndexers()[name]; !ok {
			t.Errorf("index %q missing after AddIndexers", name)
		}
	}
	keys, err := informer.GetIndexer().IndexKeys(name, "owner-uid")
	if err != nil || !slices.Equal(keys, []string{"shop/before"}) {
		t.Errorf("IndexKeys = %v, %v; want the object cached before the index", keys, err)
	}
}

// ListControlledBy finds exactly the children the owner controls, follows
// the cache as objects change controller or go, and refuses to answer
// without the index rather than answer wrong.
func TestListControlledBy(t *testing.T) {
	client := fake.NewClientset()
	informer := informers.NewSharedInformerFactory(client, 0).Core().V1().Services()
	children := NewServices(informer, client)
	owner := ownerApp()
	if _, err := children.ListControlledBy(owner); err == nil {
		t.Fatal("ListControlledBy without the index: no error")
	}
	// Two adapters over one informer, as the App and Pipeline controllers
	// have: both may ask for the index.
	if err := children.IndexByController(ownerKind); err != nil {
		t.Fatal(err)
	}
	if err := NewServices(informer, client).IndexByController(ownerKind); err != nil {
		t.Fatalf("IndexByController on a shared informer already indexed: %v", err)
	}

	store := informer.Informer().GetIndexer()
	mine := serviceOwnedBy("mine", owner.UID, true)
	moving := serviceOwnedBy("moving", owner.UID, true)
	for _, svc := range []*corev1.Service{mine, moving,
		serviceOwnedBy("owned", owner.UID, false), serviceOwnedBy("theirs", "other-uid", true), serviceOwnedBy("orphan", "", false)} {
		if err := store.Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		t.Helper()
		objs, err := children.ListControlledBy(owner)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(); !slices.Equal(got, []string{"mine", "moving"}) {
		t.Errorf("ListControlledBy = %v, want [mine moving]", got)
	}
	// Released to another controller, then deleted.
	if err := store.Update(serviceOwnedBy("moving", "other-uid", true)); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("after an update of its controller: ListControlledBy = %v, want [mine]", got)
	}
	if err := store.Delete(mine); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 0 {
		t.Errorf("after the delete: ListControlledBy = %v, want none", got)
	}
}
