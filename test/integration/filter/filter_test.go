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

package filter

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const keepAnnotation = "filter.test/keep"

func kept(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[keepAnnotation]
	return ok
}

// listOnly is a ListerWatcher that says it cannot stream lists: the
// reflector then lists and watches.
type listOnly struct{ cache.ListerWatcher }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// TestFilteredInformer runs an informer on a filtered ListerWatcher and
// moves a ConfigMap into the filter, out of it, in again, and deletes it:
// the store and the handlers follow exactly, with nothing of the objects
// that never matched, whether the informer streams its list or lists.
func TestFilteredInformer(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		name := map[bool]string{true: "streaming", false: "listing"}[streaming]
		t.Run(name, func(t *testing.T) {
			testFilteredInformer(t, streaming)
		})
	}
}

func testFilteredInformer(t *testing.T, streaming bool) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	cms := client.CoreV1().ConfigMaps(ns)
	create := func(name string, keep bool) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if keep {
			cm.Annotations = map[string]string{keepAnnotation: "1"}
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(name string, change func(*corev1.ConfigMap)) {
		t.Helper()
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(cm)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate := func(value string) func(*corev1.ConfigMap) {
		return func(cm *corev1.ConfigMap) { metav1.SetMetaDataAnnotation(&cm.ObjectMeta, keepAnnotation, value) }
	}
	unannotate := func(cm *corev1.ConfigMap) { delete(cm.Annotations, keepAnnotation) }
	remove := func(name string) {
		t.Helper()
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Before the informer: one kept, one not.
	create("before-kept", true)
	create("before-other", false)

	var watchesStreamed []bool
	var lwMu sync.Mutex
	var lw cache.ListerWatcher = &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			lwMu.Lock()
			watchesStreamed = append(watchesStreamed, o.SendInitialEvents != nil && *o.SendInitialEvents)
			lwMu.Unlock()
			return cms.Watch(ctx, o)
		},
	}
	if !streaming {
		lw = listOnly{lw}
	}
	informer := cache.NewSharedIndexInformer(controller.NewFilteredListerWatcher(lw, kept), &corev1.ConfigMap{}, 0, cache.Indexers{})
	var mu sync.Mutex
	var seen []string
	note := func(what string, obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		cm := obj.(*corev1.ConfigMap)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %s %s", what, cm.Name, cm.Annotations[keepAnnotation]))
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note("add", obj) },
		UpdateFunc: func(_, obj any) { note("update", obj) },
		DeleteFunc: func(obj any) { note("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	lwMu.Lock()
	if len(watchesStreamed) == 0 || watchesStreamed[0] != streaming {
		t.Errorf("watches streamed their list: %v, want the first %v", watchesStreamed, streaming)
	}
	lwMu.Unlock()

	create("x", false)
	update("x", annotate("1"))                                                        // into the filter
	update("x", annotate("2"))                                                        // changed while in
	update("x", unannotate)                                                           // out of it
	update("x", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": "v"} }) // changed while out
	update("x", annotate("3"))                                                        // in again
	remove("x")
	create("y", false)
	update("y", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": "v"} })
	remove("y")
	update("before-other", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": "v"} })
	update("before-kept", unannotate)
	remove("before-other")
	remove("before-kept")
	// Events come in order: once the last is seen, every earlier one was.
	create("last", true)

	want := []string{
		"add before-kept 1",
		"add x 1", "update x 2", "delete x ", "add x 3", "delete x 3",
		"delete before-kept ",
		"add last 1",
	}
	framework.Eventually(t, 30*time.Second, "the handlers to see the last ConfigMap", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seen, "add last 1"), nil
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, want) {
		t.Errorf("handlers saw\n%q\nwant\n%q", seen, want)
	}
	if keys := informer.GetStore().ListKeys(); !slices.Equal(keys, []string{ns + "/last"}) {
		t.Errorf("store holds %v, want only %s/last", keys, ns)
	}
}
