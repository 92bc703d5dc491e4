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
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	fakemetadata "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/factories"
	fakecrd "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
)

// Issue 26's noisy cluster: the Services the manager does not act on, those
// without an ingress/ annotation, cost the Ingress controller nothing. No
// informer the controller registers holds one, and what its informers
// retain per such Service, decoded as served, stays under a few bytes.
// (Before, its Services informer held every Service of the cluster, lean:
// about 1 KB each here, 3–4 bytes now; 0.87 KB in the noisy benchmark.)
func TestIngressControllerCachesNoUnannotatedService(t *testing.T) {
	const n = 10000
	wire := servedServiceList(t, n)
	client := fake.NewClientset()
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	// Every list decodes the served bytes afresh, as a real client would.
	client.PrependReactor("list", "services", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		obj, _, err := codec.Decode(wire, nil, nil)
		return true, obj, err
	})
	// The shared factories as the manager builds them.
	f := factories.New(client, fakecrd.NewSimpleClientset(), fakemetadata.NewSimpleMetadataClient(k8sruntime.NewScheme()), 0, controller.Compact)
	cc := ControllerContext{
		KubeConfig:      &rest.Config{Host: "https://127.0.0.1:1"},
		Options:         options.NewOptions(),
		InformerFactory: f.Kube,
		factories:       f,
		recorders:       func(string) record.EventRecorder { return record.NewFakeRecorder(10) },
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := newIngressController(ctx, cc); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	// Twice: a sync.Pool's victims survive one collection.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	f.Start(ctx.Done())
	defer func() {
		cancel()
		f.Shutdown()
	}()
	if !f.WaitForCacheSync(ctx.Done()) {
		t.Fatal("caches did not sync")
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	perService := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("the Ingress controller's caches retain %.0f bytes per unannotated Service", perService)
	runtime.KeepAlive(wire)

	var annotated int
	// Every factory the Ingress controller reads Services from.
	for _, f := range []informers.SharedInformerFactory{cc.InformerFactory, ingressServices(cc), cc.ManagedInformerFactory()} {
		services, err := f.Core().V1().Services().Lister().List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range services {
			if _, ok := svc.Annotations[ingress.AnnotationEnabled]; !ok {
				t.Fatalf("a cache holds Service %s/%s, which has no ingress/ annotation (and %d others)", svc.Namespace, svc.Name, len(services)-1)
			}
			annotated++
		}
	}
	if annotated != 1 {
		t.Errorf("the caches hold %d annotated Services, want the 1", annotated)
	}
	if perService > 100 {
		t.Errorf("the caches retain %.0f bytes per unannotated Service, want almost none", perService)
	}
}

// servedServiceList is the protobuf of a list of n Services without
// ingress/ annotations, as served (testdata captured from a real API server),
// with distinct names, plus one annotated Service.
func servedServiceList(t *testing.T, n int) []byte {
	t.Helper()
	var plain, annotated corev1.Service
	for file, obj := range map[string]*corev1.Service{
		filepath.Join("..", "..", "..", "controllers", "app", "testdata", "served-app-service.json"): &plain,
		filepath.Join("..", "..", "..", "controllers", "ingress", "testdata", "served-service.json"): &annotated,
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, obj); err != nil {
			t.Fatal(err)
		}
	}
	for k := range plain.Annotations {
		if strings.HasPrefix(k, "ingress/") {
			t.Fatalf("testdata Service has annotation %s", k)
		}
	}
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}}
	for i := range n {
		svc := plain.DeepCopy()
		svc.Namespace = fmt.Sprintf("noise-%03d", i%100)
		svc.Name = fmt.Sprintf("svc-%06d", i)
		svc.UID = types.UID(fmt.Sprintf("%s-%06d", plain.UID, i))
		list.Items = append(list.Items, *svc)
	}
	list.Items = append(list.Items, annotated)
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceList"))
	wire, err := k8sruntime.Encode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), list)
	if err != nil {
		t.Fatal(err)
	}
	return wire
}
