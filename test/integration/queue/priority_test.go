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

package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const timeout = 2 * time.Minute

// A controller that starts with 1,000 Apps in its informers' initial list
// has 1,000 keys queued. An App created then must be reconciled first, not
// after the backlog: the event handlers queue initial-list keys at low
// priority and a create at high. The workers start only once the fresh
// App's key is queued behind the whole backlog, so the order is exact.
//
// With --controller-queue=fifo (Queue: controller.FIFOQueue below) this
// test fails, as seen when it was written: "the fresh App was reconcile
// #1001, after 1000 keys of the initial list; want it among the first 5".
func TestFreshChangeIsReconciledBeforeTheInitialListBacklog(t *testing.T) {
	const (
		backlog = 1000
		workers = 5
	)
	_, ctx := ktesting.NewTestContext(t)
	if err := framework.InstallCRDs(ctx, cp.Config); err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, cp.Client)
	crdClient, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	apps := crdClient.AppV1beta1().Apps(ns)
	newApp := func(name string) *appv1beta1.App {
		return &appv1beta1.App{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)},
		}
	}
	createBacklog(t, ctx, backlog, func(ctx context.Context, i int) error {
		_, err := apps.Create(ctx, newApp(fmt.Sprintf("backlog-%04d", i)), metav1.CreateOptions{})
		return err
	})

	kubeInformers := informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithNamespace(ns))
	crdInformers := crdinformers.NewSharedInformerFactoryWithOptions(crdClient, 0, crdinformers.WithNamespace(ns))
	c, err := appcontroller.NewController(
		crdInformers.App().V1().Apps(),
		kubeInformers.Apps().V1().Deployments(),
		kubeInformers.Core().V1().Services(),
		kubeInformers.Networking().V1().Ingresses(),
		kubeInformers.Core().V1().Pods(),
		cp.Client, crdClient, &record.FakeRecorder{},
		appcontroller.Options{Common: controller.Common{Workers: workers, Queue: controller.PriorityQueue}},
	)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
	)
	reconcile := c.Reconcile
	c.Reconcile = func(ctx context.Context, key controller.Key) (controller.Result, error) {
		mu.Lock()
		order = append(order, key.Name)
		mu.Unlock()
		return reconcile(ctx, key)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	kubeInformers.Start(runCtx.Done())
	crdInformers.Start(runCtx.Done())
	defer kubeInformers.Shutdown()
	defer crdInformers.Shutdown()

	framework.Eventually(t, timeout, "the initial list to be queued", func(context.Context) (bool, error) {
		return c.QueueLen() == backlog, nil
	})
	if _, err := apps.Create(ctx, newApp("fresh"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the fresh App to be queued behind the backlog", func(context.Context) (bool, error) {
		return c.QueueLen() == backlog+1, nil
	})

	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	var position, queued int
	framework.Eventually(t, timeout, "the fresh App to be reconciled", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		position = slices.Index(order, "fresh")
		queued = c.QueueLen()
		return position >= 0, nil
	})
	t.Logf("the fresh App was reconcile #%d; %d backlog keys still queued", position+1, queued)
	// The workers take keys at once, so the fresh one is among the first
	// they take, with nearly the whole backlog still queued.
	if position >= workers {
		t.Fatalf("the fresh App was reconcile #%d, after %d keys of the initial list; want it among the first %d", position+1, position, workers)
	}
	if queued < backlog-10*workers {
		t.Fatalf("only %d of %d backlog keys were still queued when the fresh App was reconciled", queued, backlog)
	}
	// And it was a real reconcile: the fresh App got its Deployment.
	framework.Eventually(t, timeout, "the fresh App's Deployment", func(ctx context.Context) (bool, error) {
		_, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "fresh", metav1.GetOptions{})
		return err == nil, nil
	})
}

// createBacklog runs create for 0..n-1, 16 at a time.
func createBacklog(t *testing.T, ctx context.Context, n int, create func(context.Context, int) error) {
	t.Helper()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := create(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("creating the backlog: %v", firstErr)
	}
}
