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
	apisharding "k8s.io/apimachinery/pkg/sharding"
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
						want = s.ContainsNamespace(tc.obj.GetNamespace())
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
		if s.Predicate(Namespace)(obj) != s.ContainsNamespace("a") || s.Predicate(UID)(obj) != s.ContainsUID("b") {
			t.Errorf("shard %s places %s/%s otherwise than by its namespace and uid", s, obj.Namespace, obj.UID)
		}
	}
	if !shards[0].Predicate(Namespace)("not an object") {
		t.Error("what has no metadata is dropped")
	}
}

// Namespaces spread evenly over the shards whatever names users choose:
// sequences that differ only in their last characters, which plain FNV-1a
// (key version 1) put all in one shard, land within 10% of an even share.
func TestNamespacesOfEveryShapeSpreadEvenly(t *testing.T) {
	consonants, vowels := "bcdfghjklmnprstvwxyz", "aeiou"
	syllables := make([]string, 0, len(consonants)*len(vowels))
	for _, c := range consonants {
		for _, v := range vowels {
			syllables = append(syllables, string(c)+string(v))
		}
	}
	shapes := map[string]func(i int) string{
		"app-0 ... app-9999":        func(i int) string { return fmt.Sprintf("app-%d", i) },
		"tenant-1 ... tenant-10000": func(i int) string { return fmt.Sprintf("tenant-%d", i+1) },
		"team-<word>": func(i int) string {
			return "team-" + syllables[i/len(syllables)] + syllables[i%len(syllables)]
		},
	}
	const names = 10000
	for shape, name := range shapes {
		for _, n := range []int{4, 8} {
			shards, _ := All(n)
			counts := make([]int, n)
			for i := range names {
				for _, s := range shards {
					if s.ContainsNamespace(name(i)) {
						counts[s.Index]++
					}
				}
			}
			even := names / n
			for i, c := range counts {
				if c < even*9/10 || c > even*11/10 {
					t.Errorf("%s over %d shards: shard %d holds %d names, want %d +- 10%% (all: %v)", shape, n, i, c, even, counts)
				}
			}
		}
	}
	shards, _ := All(4)
	for _, s := range shards {
		in := 0
		for c := 'a'; c <= 'z'; c++ {
			if s.ContainsNamespace("team-" + string(c)) {
				in++
			}
		}
		if in == 0 {
			t.Errorf("shard %s holds none of team-a ... team-z", s)
		}
	}
}

// Uids are placed by the API server's own hash, so that it can select them.
func TestUIDsHashAsTheServerDoes(t *testing.T) {
	for _, uid := range []string{"", "a", "0b1c2d3e-0000-4000-8000-123456789abc"} {
		if got, want := fmt.Sprintf("%016x", uidHash(uid)), apisharding.HashField(uid); got != want {
			t.Errorf("uid %q hashes to %s, the API server's hash is %s", uid, got, want)
		}
	}
}
