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

package app

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

	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The child write path against the API server itself, whose Create records
// server defaults in an "Update" managedFields entry: a created child at
// rest costs nothing; a field the controller stops setting is removed by
// the next apply while another manager's fields stay; a same-name object
// the cache has not seen is never taken over.
func TestChildWritePath(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	client := cp.Client
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTransform(controller.TrimManagedFields))
	informer := factory.Core().V1().Services()
	services := controller.NewServices(informer, client)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	owner, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	desired := func(name string, labels map[string]string) *corev1ac.ServiceApplyConfiguration {
		return corev1ac.Service(name, ns).WithLabels(labels).
			WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").
				WithName(owner.Name).WithUID(owner.UID).WithController(true)).
			WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "web"}).
				WithPorts(corev1ac.ServicePort().WithPort(80).WithTargetPort(intstr.FromInt32(80)).WithProtocol(corev1.ProtocolTCP)))
	}
	cached := func(name, resourceVersion string) *corev1.Service {
		t.Helper()
		var svc *corev1.Service
		framework.Eventually(t, timeout, "the cache to hold Service "+name+" at "+resourceVersion, func(context.Context) (bool, error) {
			found, ok, err := services.Get(ns, name)
			svc = found
			return ok && found.ResourceVersion == resourceVersion, err
		})
		return svc
	}
	both := map[string]string{controller.ManagedByLabel: controller.ManagedByValue, "tier": "web"}

	created, write, err := services.Apply(ctx, owner, desired("web", both), nil)
	if err != nil || write != controller.Created {
		t.Fatalf("create: %v, %v", write, err)
	}
	live := cached("web", created.ResourceVersion)
	if _, write, err := services.Apply(ctx, owner, desired("web", both), live); err != nil || write != controller.Unchanged {
		t.Fatalf("a created child at rest: %v, %v; want no write", write, err)
	}

	// Another manager labels and annotates it, as kubectl edit does: from the
	// object read live (the cache holds only this manager's managedFields).
	live, err = client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.Labels["team"] = "shop"
	live.Annotations["note"] = "hand-added"
	edited, err := client.CoreV1().Services(ns).Update(ctx, live, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		t.Fatal(err)
	}
	live = cached("web", edited.ResourceVersion)
	if _, write, err := services.Apply(ctx, owner, desired("web", both), live); err != nil || write != controller.Unchanged {
		t.Fatalf("another manager's fields: %v, %v; want no write", write, err)
	}

	// The controller stops setting "tier": removed, the others stay.
	fewer := map[string]string{controller.ManagedByLabel: controller.ManagedByValue}
	applied, write, err := services.Apply(ctx, owner, desired("web", fewer), live)
	if err != nil || write != controller.Updated {
		t.Fatalf("dropping a label: %v, %v", write, err)
	}
	if _, ok := applied.Labels["tier"]; ok || applied.Labels["team"] != "shop" || applied.Annotations["note"] != "hand-added" {
		t.Errorf("after the apply: labels %v, annotations %v; want tier gone, team and note kept", applied.Labels, applied.Annotations)
	}
	if v, ok := applied.Annotations[controller.CreatedAnnotation]; ok {
		t.Errorf("the apply kept %s=%s", controller.CreatedAnnotation, v)
	}
	// The cache holds neither kubectl-edit's entry nor the Create's fields:
	// the move to an Apply entry, which rewrites the whole list, kept the one
	// and moved the other.
	entries := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range applied.ManagedFields {
		entries[mf.Manager] = mf.Operation
	}
	if entries["kubectl-edit"] != metav1.ManagedFieldsOperationUpdate || entries[controller.FieldManager] != metav1.ManagedFieldsOperationApply || len(entries) != 2 {
		t.Errorf("managedFields after the apply: %v; want kubectl-edit's Update kept and one Apply of %s", entries, controller.FieldManager)
	}
	if trimmed := cached("web", applied.ResourceVersion); len(trimmed.ManagedFields) != 1 || trimmed.ManagedFields[0].FieldsV1 == nil {
		t.Errorf("the cache holds managedFields %v; want only this manager's Apply entry, with its fields", trimmed.ManagedFields)
	}
	live = cached("web", applied.ResourceVersion)
	if _, write, err := services.Apply(ctx, owner, desired("web", fewer), live); err != nil || write != controller.Unchanged {
		t.Fatalf("at rest after the apply: %v, %v; want no write", write, err)
	}

	// A same-name object the cache does not hold (not labelled, or not seen
	// yet): the create fails, one live GET names the holder, and the object
	// is left as it was.
	blocker, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"user": "mine"}, Ports: []corev1.ServicePort{{Port: 81}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var notOwned *controller.NotOwnedError
	if _, _, err := services.Apply(ctx, owner, desired("taken", fewer), nil); !errors.As(err, &notOwned) {
		t.Fatalf("creating over an uncached object: %v, want NotOwnedError", err)
	}
	got, err := client.CoreV1().Services(ns).Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != blocker.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("the uncached object was written: resourceVersion %s -> %s, owners %v", blocker.ResourceVersion, got.ResourceVersion, got.OwnerReferences)
	}

	// The owner's own child that lost the managed-by label (edited away, or
	// made by an older version) is out of the selected cache: the create
	// finds it, and the apply puts the label back instead of reporting it.
	own, _, err := services.Apply(ctx, owner, desired("unlabelled", fewer), nil)
	if err != nil {
		t.Fatal(err)
	}
	delete(own.Labels, controller.ManagedByLabel)
	if own, err = client.CoreV1().Services(ns).Update(ctx, own, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	relabelled, write, err := services.Apply(ctx, owner, desired("unlabelled", fewer), nil)
	if err != nil || write != controller.Updated {
		t.Fatalf("our own child without the label: %v, %v; want it updated", write, err)
	}
	if relabelled.UID != own.UID || relabelled.Labels[controller.ManagedByLabel] != controller.ManagedByValue {
		t.Errorf("after the apply: uid %s (was %s), labels %v; want the same object, labelled", relabelled.UID, own.UID, relabelled.Labels)
	}
}
