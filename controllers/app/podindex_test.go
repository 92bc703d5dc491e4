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
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
)

// podOfApp is pod i of App name in namespace ns, as its Deployment's
// ReplicaSet makes it.
func podOfApp(ns, name string, i int) *corev1.Pod {
	p := appPod(i, corev1.PodStatus{})
	p.Namespace, p.Name = ns, fmt.Sprintf("%s-%s-%d", name, testHash, i)
	p.UID = types.UID(fmt.Sprintf("%s-%s-%d", ns, name, i))
	p.Labels[AppLabel] = name
	p.OwnerReferences[0].Name = name + "-" + testHash
	return p
}

func podIndexer(t testing.TB, pods ...*corev1.Pod) cache.Indexer {
	t.Helper()
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// Twice: a second App controller on the same informer finds the index.
	for range 2 {
		if err := addPodIndex(informer); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := informer.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return informer.GetIndexer()
}

// TestAppPodsMatchesTheNamespaceList: the index gives each App exactly the
// pods the namespace list by its Deployment's selector gave, legacy pods,
// other Apps' pods, other namespaces and pods of no Deployment included.
func TestAppPodsMatchesTheNamespaceList(t *testing.T) {
	web := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	legacyApp := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "shop"}}

	var all []*corev1.Pod
	for i := range 3 {
		all = append(all, podOfApp("shop", "web", i), podOfApp("shop", "api", i), podOfApp("other", "web", i))
	}
	legacy := podOfApp("shop", "old", 7)
	delete(legacy.Labels, AppLabel)
	legacy.Labels[LegacyInstanceLabel] = "old"
	orphan := podOfApp("shop", "web", 8)
	orphan.OwnerReferences = nil
	foreign := podOfApp("shop", "web", 9)
	foreign.OwnerReferences[0].Name = "someone-else-" + testHash
	all = append(all, legacy, orphan, foreign)
	indexer := podIndexer(t, all...)

	for _, tc := range []struct {
		app      *appv1.App
		selector labels.Selector
	}{
		{web, labels.SelectorFromSet(labels.Set{AppLabel: "web"})},
		{legacyApp, labels.SelectorFromSet(labels.Set{LegacyInstanceLabel: "old"})},
		// A selector the App's pods do not all carry narrows them.
		{web, labels.SelectorFromSet(labels.Set{AppLabel: "web", "tier": "front"})},
	} {
		var fromList []*corev1.Pod
		if err := cache.ListAllByNamespace(indexer, tc.app.Namespace, tc.selector, func(obj any) {
			fromList = append(fromList, obj.(*corev1.Pod))
		}); err != nil {
			t.Fatal(err)
		}
		want := podsOf(tc.app, fromList)
		got, err := appPods(indexer, tc.app, tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		if !samePods(got, want) {
			t.Errorf("appPods(%s, %s) = %v, want %v", tc.app.Name, tc.selector, names(got), names(want))
		}
	}
	if got, _ := appPods(indexer, web, labels.SelectorFromSet(labels.Set{AppLabel: "web"})); len(got) != 3 {
		t.Errorf("App web has %d pods by the index, want its 3", len(got))
	}
	if got, _ := appPods(indexer, legacyApp, labels.SelectorFromSet(labels.Set{LegacyInstanceLabel: "old"})); len(got) != 1 {
		t.Errorf("the legacy App has %d pods by the index, want 1", len(got))
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

func samePods(a, b []*corev1.Pod) bool { return slices.Equal(names(a), names(b)) }

// BenchmarkAppPods reads one App's pods among those of 2000 Apps of one
// namespace: by the index, and by the namespace list it replaced.
func BenchmarkAppPods(b *testing.B) {
	var all []*corev1.Pod
	for i := range 2000 {
		all = append(all, podOfApp("bench", fmt.Sprintf("app-%d", i), 0))
	}
	indexer := podIndexer(b, all...)
	app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "app-1000", Namespace: "bench"}}
	selector := labels.SelectorFromSet(labels.Set{AppLabel: app.Name})
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if pods, _ := appPods(indexer, app, selector); len(pods) != 1 {
				b.Fatalf("%d pods", len(pods))
			}
		}
	})
	b.Run("namespace-list", func(b *testing.B) {
		for b.Loop() {
			var pods []*corev1.Pod
			_ = cache.ListAllByNamespace(indexer, app.Namespace, selector, func(obj any) { pods = append(pods, obj.(*corev1.Pod)) })
			if pods = podsOf(app, pods); len(pods) != 1 {
				b.Fatalf("%d pods", len(pods))
			}
		}
	})
}
