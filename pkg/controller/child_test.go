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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func newServiceChildren(t *testing.T) (*Services, *fake.Clientset, func(*corev1.Service)) {
	t.Helper()
	client := fake.NewClientset()
	informer := informers.NewSharedInformerFactory(client, 0).Core().V1().Services()
	children := NewServices(informer, client)
	var b Base
	if err := b.Track(children); err != nil {
		t.Fatal(err)
	}
	cached := func(svc *corev1.Service) {
		if err := informer.Informer().GetIndexer().Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	return children, client, cached
}

func ownerApp() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "owner-uid"}}
}

func desiredChildService() *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service("web", "shop").
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").
			WithName("web").WithUID("owner-uid").WithController(true)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(map[string]string{"app": "web"}).
			WithPorts(corev1ac.ServicePort().WithPort(80).WithTargetPort(intstr.FromInt32(80)).WithProtocol(corev1.ProtocolTCP)))
}

// A missing child is created, with no read first; a reconcile of what the
// create returned sends nothing; a change of the desired fields moves the
// Create's fields to this manager's apply, then applies; an unowned
// same-name object is never written.
func TestChildrenApply(t *testing.T) {
	ctx := context.Background()
	children, client, cached := newServiceChildren(t)

	created, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), nil)
	if err != nil || write != Created {
		t.Fatalf("create: write %v, err %v", write, err)
	}
	if n := len(client.Actions()); n != 1 || client.Actions()[0].GetVerb() != "create" {
		t.Fatalf("create sent %v, want one create", client.Actions())
	}
	if created.Annotations[CreatedAnnotation] == "" {
		t.Error("created child carries no creation hash")
	}

	client.ClearActions()
	cached(created)
	live, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), created)
	if err != nil || write != Unchanged || live != created {
		t.Fatalf("at rest: write %v, err %v", write, err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Fatalf("a converged child cost %d requests: %v", n, client.Actions())
	}

	// A field the controller stops setting changes the creation hash.
	fewer := func() *corev1ac.ServiceApplyConfiguration {
		svc := desiredChildService()
		svc.Labels = nil
		return svc
	}
	applied, write, err := children.Apply(ctx, ownerApp(), fewer(), created)
	if err != nil || write != Updated {
		t.Fatalf("changed desired fields: write %v, err %v", write, err)
	}
	client.ClearActions()
	if _, write, err := children.Apply(ctx, ownerApp(), fewer(), applied); err != nil || write != Unchanged {
		t.Fatalf("at rest after the apply: write %v, err %v, requests %v", write, err, client.Actions())
	}
	if _, ok := applied.Labels[ManagedByLabel]; ok || applied.Annotations[CreatedAnnotation] != "" {
		t.Errorf("the apply kept what the controller no longer sets: labels %v, annotations %v", applied.Labels, applied.Annotations)
	}

	unowned := created.DeepCopy()
	unowned.OwnerReferences = nil
	_, write, err = children.Apply(ctx, ownerApp(), desiredChildService(), unowned)
	var notOwned *NotOwnedError
	if !errors.As(err, &notOwned) || write != Unchanged {
		t.Fatalf("unowned object: write %v, err %v, want a NotOwnedError", write, err)
	}
	if deleted, err := children.Delete(ctx, ownerApp(), unowned); deleted || err != nil {
		t.Fatalf("unowned object deleted: %v %v", deleted, err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Fatalf("an unowned object was written: %v", client.Actions())
	}

	// Deletes of what the owner controls carry its UID.
	if deleted, err := children.Delete(ctx, ownerApp(), created); !deleted || err != nil {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if _, err := client.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("child still exists after delete")
	}
}

// An unowned object the cache does not hold (no managed-by label, or the
// cache behind) is not taken over: the Create fails with AlreadyExists, one
// live GET reads the holder, and the owner gets a NotOwnedError.
func TestChildrenApplyDoesNotTakeOverUncachedObject(t *testing.T) {
	ctx := context.Background()
	children, client, _ := newServiceChildren(t)
	user := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "user-uid"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"user": "mine"}}}
	if _, err := client.CoreV1().Services("shop").Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()

	_, _, err := children.Apply(ctx, ownerApp(), desiredChildService(), nil)
	var notOwned *NotOwnedError
	if !errors.As(err, &notOwned) {
		t.Fatalf("uncached unowned object: err %v, want NotOwnedError", err)
	}
	if n := len(client.Actions()); n != 2 || client.Actions()[0].GetVerb() != "create" || client.Actions()[1].GetVerb() != "get" {
		t.Errorf("sent %v, want the create and one get", client.Actions())
	}
	got, err := client.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Spec.Selector["user"] != "mine" || got.Annotations[CreatedAnnotation] != "" {
		t.Errorf("the user's object was changed: owners %v, selector %v, annotations %v", got.OwnerReferences, got.Spec.Selector, got.Annotations)
	}
}
