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
	"encoding/json"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
	crdfake "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
)

// readServed decodes testdata/served-<name>.json: objects as a real API
// server served them once the App had converged (its pods available),
// captured from an integration run.
func readServed(t testing.TB, name string, into any) {
	t.Helper()
	data, err := os.ReadFile("testdata/served-" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("decoding %s: %v", name, err)
	}
}

// convergedController is a controller whose caches hold one converged App,
// its three children and its pod, as served; its clients record requests.
func convergedController(t testing.TB) (*Controller, *kubefake.Clientset, *crdfake.Clientset, controller.Key) {
	t.Helper()
	app := &appv1.App{}
	deployment := &appsv1.Deployment{}
	service := &corev1.Service{}
	ing := &networkingv1.Ingress{}
	pods := &corev1.PodList{}
	readServed(t, "app", app)
	readServed(t, "app-deployment", deployment)
	readServed(t, "app-service", service)
	readServed(t, "app-ingress", ing)
	readServed(t, "app-pods", pods)

	kube, crd := kubefake.NewClientset(), crdfake.NewSimpleClientset()
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	crdFactory := crdinformers.NewSharedInformerFactory(crd, 0)
	apps := crdFactory.App().V1().Apps()
	deployments := kubeFactory.Apps().V1().Deployments()
	services := kubeFactory.Core().V1().Services()
	ingresses := kubeFactory.Networking().V1().Ingresses()
	podInformer := kubeFactory.Core().V1().Pods()
	opts := DefaultOptions()
	opts.IngressDomain = "apps.example.com"
	c, err := NewController(apps, deployments, services, ingresses, podInformer, kube, crd, record.NewFakeRecorder(100), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		store interface{ Add(any) error }
		obj   any
	}{
		{apps.Informer().GetIndexer(), app},
		{deployments.Informer().GetIndexer(), deployment},
		{services.Informer().GetIndexer(), service},
		{ingresses.Informer().GetIndexer(), ing},
	} {
		if err := step.store.Add(step.obj); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pods.Items {
		pod, err := TransformPod(&pods.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := podInformer.Informer().GetIndexer().Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	kube.ClearActions()
	crd.ClearActions()
	return c, kube, crd, controller.Key{Namespace: app.Namespace, Name: app.Name}
}

// The served, converged App is up to date: its reconcile sends nothing.
func TestConvergedAppWritesNothing(t *testing.T) {
	c, kube, crd, key := convergedController(t)
	for range 2 {
		if _, err := c.sync(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	if actions := append(kube.Actions(), crd.Actions()...); len(actions) != 0 {
		t.Fatalf("the reconcile of a converged App sent %d requests: %v", len(actions), actions)
	}
}

// A resync of a converged App does not compare its unchanged children
// again: the comparison (about 4,400 allocations a reconcile) was most of
// the steady state's cost.
func TestSteadySyncIsCheap(t *testing.T) {
	c, _, _, key := convergedController(t)
	ctx := context.Background()
	if _, err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := c.sync(ctx, key); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1000 {
		t.Errorf("a steady reconcile allocates %.0f times, want at most 1000", allocs)
	}
}

// BenchmarkSteadySync is one reconcile of a converged App, as an informer
// resync asks for: the steady state's unit of work.
func BenchmarkSteadySync(b *testing.B) {
	c, kube, crd, key := convergedController(b)
	ctx := klog.NewContext(context.Background(), klog.Background())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.sync(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	if actions := append(kube.Actions(), crd.Actions()...); len(actions) != 0 {
		b.Fatalf("sent %d requests: %v", len(actions), actions)
	}
}
