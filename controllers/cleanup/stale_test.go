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

package cleanup

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ndsl/controller-manager/pkg/controller"
)

func managed(annotations map[string]string, refs ...metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{
		Namespace: "ns", Name: "child",
		Labels:          map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
		Annotations:     annotations,
		OwnerReferences: refs,
	}
}

func controllerRef(kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: "ingress.example.com/v1beta1", Kind: kind, Name: name, UID: uid, Controller: &yes}
}

func TestSweepable(t *testing.T) {
	if !sweepable(managed(nil)) {
		t.Error("managed object not sweepable")
	}
	if sweepable(managed(map[string]string{KeepAnnotation: "true"})) {
		t.Error("object with the keep annotation is sweepable")
	}
	if !sweepable(managed(map[string]string{KeepAnnotation: "false"})) {
		t.Error(`keep: "false" should not protect`)
	}
	foreign := managed(nil)
	foreign.Labels[controller.ManagedByLabel] = "helm"
	if sweepable(foreign) {
		t.Error("object managed by someone else is sweepable")
	}
}

func TestOrphanReason(t *testing.T) {
	lookup := func(ref metav1.OwnerReference, ns string) (types.UID, bool, bool) {
		if ref.Kind != "App" {
			return "", false, false
		}
		if ns != "ns" {
			t.Errorf("owner looked up in namespace %q", ns)
		}
		switch ref.Name {
		case "alive":
			return "uid-alive", true, true
		case "recreated":
			return "uid-new", true, true
		}
		return "", false, true
	}
	cases := map[string]struct {
		obj  *metav1.ObjectMeta
		want string
	}{
		"orphaned on purpose": {managed(nil), ""},
		"owner alive":         {managed(nil, controllerRef("App", "alive", "uid-alive")), ""},
		"owner gone":          {managed(nil, controllerRef("App", "gone", "uid-gone")), "no longer exists"},
		"owner recreated":     {managed(nil, controllerRef("App", "recreated", "uid-old")), "replaced"},
		"unknown owner kind":  {managed(nil, controllerRef("Mystery", "x", "uid")), ""},
	}
	for name, tc := range cases {
		got := orphanReason(tc.obj, lookup)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: reason = %q, want %q", name, got, tc.want)
		}
	}
}
