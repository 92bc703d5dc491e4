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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// A controller rebuilt after the manager started the factories gets the
// same factory by name, and an informer it adds then is started too.
func TestFilteredInformerFactoryIsSharedByNameAndStartedLate(t *testing.T) {
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"a": "b"}}})
	cc := ControllerContext{filtered: newFilteredFactories(client, 0)}
	selected := informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "a=b" })
	first := cc.FilteredInformerFactory("pods", selected)
	if again := cc.FilteredInformerFactory("pods", selected); again != first {
		t.Fatal("a second call with the same name made a second factory")
	}
	if other := cc.FilteredInformerFactory("other"); other == first {
		t.Fatal("another name returned the same factory")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := cc.filtered.started(ctx.Done())
	if len(started) != 2 {
		t.Fatalf("started %d factories, want 2", len(started))
	}
	for _, f := range started {
		f.Start(ctx.Done())
	}
	defer func() {
		cancel() // Shutdown waits for the informers, which stop with ctx.
		for _, f := range started {
			f.Shutdown()
		}
	}()
	// As a rebuild would: an informer added after the start.
	pods := first.Core().V1().Pods()
	pods.Informer()
	cc.filtered.startNew()
	if synced := first.WaitForCacheSync(ctx.Done()); len(synced) != 1 || !allSynced(synced) {
		t.Fatalf("informers synced: %v; want the pod informer added after the start", synced)
	}
	if list, err := pods.Lister().List(labels.Everything()); err != nil || len(list) != 1 {
		t.Fatalf("cached pods = %v, %v; want the one pod", list, err)
	}
}
