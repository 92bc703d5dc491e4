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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
