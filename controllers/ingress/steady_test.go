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

package ingress

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// convergedController is a controller whose caches hold one annotated
// Service and its Ingress as a real API server served them (testdata,
// captured from an integration run); its client records requests.
func convergedController(t testing.TB) (*Controller, *kubefake.Clientset, controller.Key) {
	t.Helper()
	svc, ing := &corev1.Service{}, &networkingv1.Ingress{}
	for name, obj := range map[string]any{"service": svc, "ingress": ing} {
		data, err := os.ReadFile("testdata/served-" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, obj); err != nil {
			t.Fatal(err)
		}
	}
	kube := kubefake.NewClientset()
	factory := kubeinformers.NewSharedInformerFactory(kube, 0)
	services, ingresses := factory.Core().V1().Services(), factory.Networking().V1().Ingresses()
	opts := DefaultOptions()
	opts.DefaultDomain = "apps.example.com" // the served Ingress's host
	c, err := NewController(services, ingresses, kube, record.NewFakeRecorder(10), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := services.Informer().GetIndexer().Add(svc); err != nil {
		t.Fatal(err)
	}
	if err := ingresses.Informer().GetIndexer().Add(ing); err != nil {
		t.Fatal(err)
	}
	return c, kube, controller.Key{Namespace: svc.Namespace, Name: svc.Name}
}

// The served Ingress of an annotated Service is up to date: its reconcile
// sends nothing.
func TestConvergedServiceWritesNothing(t *testing.T) {
	c, kube, key := convergedController(t)
	for range 2 {
		if _, err := c.sync(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	if actions := kube.Actions(); len(actions) != 0 {
		t.Fatalf("the reconcile of a converged Service sent %d requests: %v", len(actions), actions)
	}
}

// A resync of a converged Service does not compare its unchanged Ingress
// again (about 1,000 allocations a reconcile before).
func TestSteadySyncIsCheap(t *testing.T) {
	c, _, key := convergedController(t)
	ctx := context.Background()
	if _, err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := c.sync(ctx, key); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 200 {
		t.Errorf("a steady reconcile allocates %.0f times, want at most 200", allocs)
	}
}

// BenchmarkSteadySync is one reconcile of a converged annotated Service, as
// an informer resync asks for.
func BenchmarkSteadySync(b *testing.B) {
	c, kube, key := convergedController(b)
	ctx := klog.NewContext(context.Background(), klog.Background())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.sync(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	if actions := kube.Actions(); len(actions) != 0 {
		b.Fatalf("sent %d requests: %v", len(actions), actions)
	}
}
