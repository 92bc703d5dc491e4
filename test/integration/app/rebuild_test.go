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
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A controller rebuilt on the same informers, as in per-controller mode on
// every handover or lost Lease, leaves nothing of its stopped self behind:
// no informer handler (each holds goroutines and a map of verdicts) and no
// blocker watch. 100 generations, each reconciling an App blocked by a
// same-name Deployment it does not control (so each starts a watch), must
// keep the goroutines and the heap flat (issue 36, "Also fix").
func TestRebuiltControllerLeavesNothingBehind(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := framework.CreateNamespace(t, cp.Client)
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	crdClient, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "blocked"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
			Replicas: ptr.To[int32](0),
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := crdClient.AppV1beta1().Apps(ns).Create(ctx, newApp("blocked", false, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kube := informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithNamespace(ns))
	crd := crdinformers.NewSharedInformerFactoryWithOptions(crdClient, 0, crdinformers.WithNamespace(ns))
	defer kube.Shutdown()
	defer crd.Shutdown()
	defer cancel()

	// generation builds a controller, runs it until it reconciled the
	// blocked App (its Warning), and stops it.
	generation := func() {
		t.Helper()
		recorder := record.NewFakeRecorder(100)
		c, err := appcontroller.NewController(
			crd.App().V1().Apps(), kube.Apps().V1().Deployments(), kube.Core().V1().Services(),
			kube.Networking().V1().Ingresses(), kube.Core().V1().Pods(),
			cp.Client, crdClient, recorder, appcontroller.Options{Common: controller.Common{Workers: 1}, IngressDomain: domain, IngressClass: class},
		)
		if err != nil {
			t.Fatal(err)
		}
		kube.Start(ctx.Done())
		crd.Start(ctx.Done())
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { c.Run(runCtx); close(done) }()
		defer func() { stop(); <-done }()
		deadline := time.After(timeout)
		for {
			select {
			case ev := <-recorder.Events:
				if strings.Contains(ev, "ResourceExists") {
					return
				}
			case <-deadline:
				t.Fatal("the controller never reported the blocked Deployment")
			}
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}

	// A few generations first: informers, clients and pools reach their size.
	for range 5 {
		generation()
	}
	goroutines, heapBefore := runtime.NumGoroutine(), heap()
	for range 100 {
		generation()
	}
	// Stopped watches and handlers end asynchronously, within moments.
	var after int
	deadline := time.Now().Add(timeout)
	for {
		if after = runtime.NumGoroutine(); after <= goroutines+10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	heapAfter := heap()
	t.Logf("over 100 rebuilds: goroutines %d → %d, heap %d → %d KiB", goroutines, after, heapBefore>>10, heapAfter>>10)
	if after > goroutines+10 {
		t.Errorf("goroutines grew from %d to %d over 100 rebuilds: stopped controllers left handlers or watches behind", goroutines, after)
	}
	if heapAfter > heapBefore+2<<20 {
		t.Errorf("heap grew from %d to %d KiB over 100 rebuilds", heapBefore>>10, heapAfter>>10)
	}
}
