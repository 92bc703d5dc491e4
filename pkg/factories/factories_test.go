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

package factories

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakemetadata "k8s.io/client-go/metadata/fake"

	fakecrd "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
)

// A controller rebuilt after the factories started gets the same filtered
// factory by name, and an informer it adds then is started too.
func TestFilteredFactoryIsSharedByNameAndStartedLate(t *testing.T) {
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"a": "b"}}})
	f := New(client, fakecrd.NewSimpleClientset(), fakemetadata.NewSimpleMetadataClient(runtime.NewScheme()), 0, nil)
	selected := informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "a=b" })
	first := f.Filtered("pods", selected)
	if again := f.Filtered("pods", selected); again != first {
		t.Fatal("a second call with the same name made a second factory")
	}
	if other := f.Filtered("other"); other == first {
		t.Fatal("another name returned the same factory")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.Start(ctx.Done())
	defer func() {
		cancel() // Shutdown waits for the informers, which stop with ctx.
		f.Shutdown()
	}()
	// As a rebuild would: an informer added after the start.
	pods := first.Core().V1().Pods()
	pods.Informer()
	f.StartNew()
	if synced := first.WaitForCacheSync(ctx.Done()); len(synced) != 1 || !allSynced(synced) {
		t.Fatalf("informers synced: %v; want the pod informer added after the start", synced)
	}
	if !f.WaitForCacheSync(ctx.Done()) {
		t.Fatal("the factories did not sync")
	}
	if list, err := pods.Lister().List(labels.Everything()); err != nil || len(list) != 1 {
		t.Fatalf("cached pods = %v, %v; want the one pod", list, err)
	}
}
