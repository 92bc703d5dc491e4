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

package shard

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var pipelineKind = schema.GroupKind{Group: "distri-infer.ndsl.cn", Kind: "Pipeline"}

// ref is an owner reference to apiVersion/kind uid, the controller if controller.
func ref(apiVersion, kind, uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: types.UID(uid), Controller: ptr.To(controller)}
}

// A Pipeline's children, wherever their namespace, are in the shard of the
// Pipeline's uid, which is the Pipeline's own shard by UID; anything else
// is placed by its namespace.
func TestControllerOwner(t *testing.T) {
	key := ControllerOwner(pipelineKind)
	for i := range 64 {
		pipelineUID := fmt.Sprintf("5c1e7f2a-0000-4000-8000-%012d", i)
		pipeline := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID(pipelineUID)}}
		ns := fmt.Sprintf("team-%d", i)
		for _, tc := range []struct {
			name string
			obj  metav1.Object
			// byOwner: in the Pipeline's shard; else in its namespace's.
			byOwner bool
		}{
			{"a Deployment the Pipeline controls", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				OwnerReferences: []metav1.OwnerReference{ref("distri-infer.ndsl.cn/v1beta1", "Pipeline", pipelineUID, true)}}}, true},
			{"a PV the Pipeline controls", &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{
				OwnerReferences: []metav1.OwnerReference{ref("distri-infer.ndsl.cn/v1", "Pipeline", pipelineUID, true)}}}, true},
			{"its controller listed after another owner", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				OwnerReferences: []metav1.OwnerReference{ref("v1", "ConfigMap", "other", false), ref("distri-infer.ndsl.cn/v1beta1", "Pipeline", pipelineUID, true)}}}, true},
			{"owned by the Pipeline, not controlled", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				OwnerReferences: []metav1.OwnerReference{ref("distri-infer.ndsl.cn/v1beta1", "Pipeline", pipelineUID, false)}}}, false},
			{"controlled by a kind of another group", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				OwnerReferences: []metav1.OwnerReference{ref("example.com/v1", "Pipeline", pipelineUID, true)}}}, false},
			{"controlled by a namespaced App", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				OwnerReferences: []metav1.OwnerReference{ref("ingress.example.com/v1beta1", "App", pipelineUID, true)}}}, false},
			{"no owner", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}, false},
			{"a bad apiVersion", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				OwnerReferences: []metav1.OwnerReference{ref("a/b/c", "Pipeline", pipelineUID, true)}}}, false},
		} {
			for _, n := range []int{1, 2, 4} {
				shards, _ := All(n)
				in := 0
				for _, s := range shards {
					got := s.Predicate(key)(tc.obj)
					want := s.Predicate(UID)(pipeline)
					if !tc.byOwner {
						want = s.Contains(tc.obj.GetNamespace())
					}
					if got != want {
						t.Errorf("%s, %s: in shard %s is %v, want %v", tc.name, ns, s, got, want)
					}
					if tombstone := (cache.DeletedFinalStateUnknown{Key: "k", Obj: tc.obj}); s.Predicate(key)(tombstone) != got {
						t.Errorf("%s: its tombstone is placed elsewhere than it", tc.name)
					}
					if got {
						in++
					}
				}
				if in != 1 {
					t.Errorf("%s is in %d of %d shards", tc.name, in, n)
				}
			}
		}
	}
}

// Namespace and UID place objects by those fields.
func TestNamespaceAndUID(t *testing.T) {
	shards, _ := All(4)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", UID: "b"}}
	for _, s := range shards {
		if s.Predicate(Namespace)(obj) != s.Contains("a") || s.Predicate(UID)(obj) != s.Contains("b") {
			t.Errorf("shard %s places %s/%s otherwise than by its namespace and uid", s, obj.Namespace, obj.UID)
		}
	}
	if !shards[0].Predicate(Namespace)("not an object") {
		t.Error("what has no metadata is dropped")
	}
}

// Pinned, the limit the package documentation states: FNV-1a barely mixes a
// value's last bytes into the high bits the ranges are cut on, so ten
// namespaces that differ in their last character share one shard of 4.
func TestShortSuffixesShareAShard(t *testing.T) {
	shards, _ := All(4)
	for _, s := range shards {
		in := 0
		for i := range 10 {
			if s.Contains(fmt.Sprintf("team-%d", i)) {
				in++
			}
		}
		if in != 0 && in != 10 {
			t.Errorf("shard %s holds %d of team-0 ... team-9, want all or none", s, in)
		}
	}
}
