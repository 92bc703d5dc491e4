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
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// A remembered "up to date" holds only for the same child version and the
// same desired fields: a drifted child (a new resourceVersion) and a new
// desired state are both compared again, and written.
func TestRememberedVerdictIsExact(t *testing.T) {
	ctx := context.Background()
	children, client, cached := newServiceChildren(t)
	created, _, err := children.Apply(ctx, ownerApp(), desiredChildService(), nil)
	if err != nil {
		t.Fatal(err)
	}
	created.ResourceVersion = "1"
	cached(created)
	client.ClearActions()
	for range 2 { // compared, then remembered
		if _, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), created); err != nil || write != Unchanged {
			t.Fatalf("at rest: write %v, err %v", write, err)
		}
	}
	if ok := children.verdicts.remembers(created.UID); !ok {
		t.Fatal("the verdict of an up-to-date child was not remembered")
	}

	// Same child version, other desired fields: compared, and updated.
	otherPort := desiredChildService()
	otherPort.Spec.Ports[0].WithPort(8080)
	if _, write, err := children.Apply(ctx, ownerApp(), otherPort, created); err != nil || write != Updated {
		t.Fatalf("new desired fields on a remembered child: write %v, err %v, want Updated", write, err)
	}

	// Same desired fields, a drifted child: compared, and updated.
	drifted := created.DeepCopy()
	drifted.ResourceVersion = "2"
	drifted.Spec.Selector = map[string]string{"app": "someone-else"}
	client.ClearActions()
	if _, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), drifted); err != nil || write != Updated {
		t.Fatalf("drifted child with a remembered verdict: write %v, err %v, want Updated", write, err)
	}

	// A child that goes takes its verdict with it.
	children.verdicts.forgetDeleted().OnDelete(&corev1.Service{ObjectMeta: created.ObjectMeta})
	if ok := children.verdicts.remembers(created.UID); ok {
		t.Error("the verdict of a deleted child is still remembered")
	}
}

// TestCreatedChildIsRemembered: the reconcile that a child's creation
// brings back finds the create's answer remembered as up to date and
// neither compares nor writes, even where the answer differs from desired
// (as an admission plugin may make it); the child's next version is
// compared again.
func TestCreatedChildIsRemembered(t *testing.T) {
	ctx := context.Background()
	children, client, cached := newServiceChildren(t)
	client.PrependReactor("create", "services", func(action clienttesting.Action) (bool, kruntime.Object, error) {
		svc := action.(clienttesting.CreateAction).GetObject().(*corev1.Service).DeepCopy()
		svc.UID, svc.ResourceVersion = "uid-created", "1"
		svc.Spec.Selector = map[string]string{"app": "web", "admitted": "yes"}
		svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &metav1.Time{Time: time.Unix(100, 0)}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
		return true, svc, client.Tracker().Add(svc)
	})
	created, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), nil)
	if err != nil || write != Created {
		t.Fatalf("create: write %v, err %v", write, err)
	}
	// The informer's copy: trimmed managedFields.
	trimmed, err := Compact(created.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	inCache := trimmed.(*corev1.Service)
	cached(inCache)
	client.ClearActions()
	if _, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), inCache); err != nil || write != Unchanged {
		t.Fatalf("the created child back from the cache: write %v, err %v, want Unchanged", write, err)
	}
	if len(client.Actions()) != 0 {
		t.Errorf("the created child back from the cache: requests %v, want none", client.Actions())
	}

	// Its next version is compared: the admitted selector goes.
	next := inCache.DeepCopy()
	next.ResourceVersion = "2"
	if _, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), next); err != nil || write != Updated {
		t.Fatalf("the child's next version: write %v, err %v, want Updated", write, err)
	}
}

// TestVerdictCost: a remembered verdict, one per cached child, costs little
// beside the child itself (its UID and resourceVersion strings are the
// child's own).
func TestVerdictCost(t *testing.T) {
	const n = 20000
	children := make([]*corev1.Service, n)
	for i := range children {
		children[i] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			UID: types.UID(fmt.Sprintf("uid-%06d", i)), ResourceVersion: fmt.Sprint(i + 1)}}
	}
	v := &upToDateVerdicts{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, child := range children {
		v.remember(child, desiredSum([]byte(fmt.Sprint(i))))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	runtime.KeepAlive(children)
	perVerdict := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per remembered verdict", perVerdict)
	// With a sync.Map and full SHA-256 sums: 167; with this map: 92.
	if perVerdict > 120 {
		t.Errorf("a remembered verdict costs %.0f bytes, more than 120", perVerdict)
	}
}

// remembers reports whether a verdict of the child uid is remembered.
func (v *upToDateVerdicts) remembers(uid types.UID) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	_, ok := v.byUID[uid]
	return ok
}

// TestVerdictVersion: for a kind whose generation follows its spec, a
// status write (a new resourceVersion only) keeps a verdict, and any change
// drift could see does not; for the other kinds, every new resourceVersion
// is a new version.
func TestVerdictVersion(t *testing.T) {
	served := func() *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns", UID: "uid-1", ResourceVersion: "10", Generation: 2,
			Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "App", Name: "web", UID: "owner", Controller: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "apps/v1", Time: &metav1.Time{Time: time.Unix(100, 0)}}},
		}}
	}
	bySpec := &upToDateVerdicts{bySpec: specGenerations[schema.GroupResource{Group: "apps", Resource: "deployments"}]}
	byVersion := &upToDateVerdicts{}
	if !bySpec.bySpec {
		t.Fatal("Deployments are not known to raise their generation on spec changes")
	}
	base := served()
	for _, c := range []struct {
		name          string
		change        func(*appsv1.Deployment)
		sameBySpec    bool
		sameByVersion bool
	}{
		{"nothing", func(*appsv1.Deployment) {}, true, true},
		{"a status write", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.Status.Replicas = 3 }, true, false},
		{"the spec", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.Generation = 3 }, false, false},
		{"a label", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.Labels["a"] = "2" }, false, false},
		{"a label moved into an annotation", func(d *appsv1.Deployment) {
			d.ResourceVersion = "11"
			d.Labels, d.Annotations = map[string]string{}, map[string]string{"a": "1", "b": "2"}
		}, false, false},
		{"the owner", func(d *appsv1.Deployment) { d.ResourceVersion = "11"; d.OwnerReferences[0].Controller = nil }, false, false},
		{"this manager's entry", func(d *appsv1.Deployment) {
			d.ResourceVersion = "11"
			d.ManagedFields[0].Time = &metav1.Time{Time: time.Unix(200, 0)}
		}, false, false},
		{"the Deployment controller's revision", func(d *appsv1.Deployment) {
			d.ResourceVersion = "11"
			d.Annotations["deployment.kubernetes.io/revision"] = "1"
		}, true, false},
		{"another manager's entry", func(d *appsv1.Deployment) {
			d.ResourceVersion = "11"
			d.ManagedFields = append(d.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"})
		}, true, false},
	} {
		changed := served()
		c.change(changed)
		if same := bySpec.versionOf(changed) == bySpec.versionOf(base); same != c.sameBySpec {
			t.Errorf("by generation, after %s: same version %v, want %v", c.name, same, c.sameBySpec)
		}
		if same := byVersion.versionOf(changed) == byVersion.versionOf(base); same != c.sameByVersion {
			t.Errorf("by resourceVersion, after %s: same version %v, want %v", c.name, same, c.sameByVersion)
		}
	}
	// A served object without a generation is judged by its resourceVersion.
	noGeneration, other := served(), served()
	noGeneration.Generation, other.Generation, other.ResourceVersion = 0, 0, "11"
	if bySpec.versionOf(noGeneration) == bySpec.versionOf(other) {
		t.Error("without a generation, a new resourceVersion kept the version")
	}
}
