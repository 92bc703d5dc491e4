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
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// cachedBytes is the heap n copies of the served object in file cost once
// decoded from protobuf, as the informers receive them, transformed and
// held in a store, per copy.
func cachedBytes(t *testing.T, file string, obj k8sruntime.Object, transform cache.TransformFunc, n int) float64 {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		// The file is a list of the App's pods: one of them.
		var list corev1.PodList
		if err := json.Unmarshal(data, &list); err != nil {
			t.Fatal(err)
		}
		*pod = list.Items[0]
	} else if err := json.Unmarshal(data, obj); err != nil {
		t.Fatal(err)
	}
	// The testdata's objects lost their kind in the capture.
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	wire, err := k8sruntime.Encode(codec, obj)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	name := obj.(metav1.Object).GetName()
	for i := range n {
		// Distinct names wherever the object repeats its name (labels,
		// selectors, owners, backends), as n objects of a cluster have:
		// the same length keeps the protobuf encoding valid.
		distinct := bytes.ReplaceAll(wire, []byte(name), fmt.Appendf(nil, "n%0*d", len(name)-1, i))
		decoded, _, err := codec.Decode(distinct, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		accessor := decoded.(metav1.Object)
		accessor.SetUID(types.UID(fmt.Sprintf("%s-%06d", accessor.GetUID(), i)))
		out, err := transform(decoded)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(out); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestCachedObjectCost reports what each cached kind costs in heap per
// object, as the manager's informers hold it, and holds each to a budget
// (before controller.Compact, in bytes: Deployment 4950, Service 2700,
// Ingress 2070, pod 2660).
func TestCachedObjectCost(t *testing.T) {
	const n = 2000
	appData := filepath.Join("..", "..", "..", "controllers", "app", "testdata")
	cases := []struct {
		name      string
		file      string
		obj       k8sruntime.Object
		transform cache.TransformFunc
		// budget is the most bytes it may cost; 0: only reported.
		budget float64
	}{
		{"managed Deployment, trimmed", "served-app-deployment.json", &appsv1.Deployment{}, controller.TrimManagedFields, 0},
		{"managed Deployment", "served-app-deployment.json", &appsv1.Deployment{}, controller.Compact, 4200},
		{"managed Service, trimmed", "served-app-service.json", &corev1.Service{}, controller.TrimManagedFields, 0},
		{"managed Service", "served-app-service.json", &corev1.Service{}, controller.Compact, 2580},
		{"annotated Service, Ingress controller", filepath.Join("..", "..", "ingress", "testdata", "served-service.json"), &corev1.Service{}, ingress.TransformService, 0},
		{"managed Ingress, trimmed", "served-app-ingress.json", &networkingv1.Ingress{}, controller.TrimManagedFields, 0},
		{"managed Ingress", "served-app-ingress.json", &networkingv1.Ingress{}, controller.Compact, 1950},
		{"pod", "served-app-pods.json", &corev1.Pod{}, app.TransformPod, 2550},
	}
	for _, tc := range cases {
		got := cachedBytes(t, filepath.Join(appData, tc.file), tc.obj, tc.transform, n)
		t.Logf("%-36s %6.0f bytes per object", tc.name, got)
		if tc.budget > 0 && got > tc.budget {
			t.Errorf("%s costs %.0f bytes, more than its budget of %.0f", tc.name, got, tc.budget)
		}
	}
}
