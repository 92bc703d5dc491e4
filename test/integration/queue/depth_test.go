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
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // workqueue_* in the legacy registry, as the manager serves them
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// depthEnv is a namespace with backlog Apps and running informers on it,
// on which App controllers are built as the manager builds them.
type depthEnv struct {
	kube informers.SharedInformerFactory
	crd  crdinformers.SharedInformerFactory
	ns   string
}

func newDepthEnv(t *testing.T, ctx context.Context, backlog int) *depthEnv {
	t.Helper()
	if err := framework.InstallCRDs(ctx, cp.Config); err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, cp.Client)
	crdClient, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	createBacklog(t, ctx, backlog, func(ctx context.Context, i int) error {
		_, err := crdClient.AppV1beta1().Apps(ns).Create(ctx, &appv1beta1.App{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("backlog-%04d", i)},
			Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)},
		}, metav1.CreateOptions{})
		return err
	})
	return &depthEnv{
		kube: informers.NewSharedInformerFactoryWithOptions(cp.Client, 0, informers.WithNamespace(ns)),
		crd:  crdinformers.NewSharedInformerFactoryWithOptions(crdClient, 0, crdinformers.WithNamespace(ns)),
		ns:   ns,
	}
}

// build returns an App controller with one worker whose reconciles block
// until cancelled, so that whatever it queued stays queued; started counts
// the reconciles begun. The informers are started (again) after it
// registered its handlers, as the manager does.
func (e *depthEnv) build(t *testing.T, ctx context.Context, started *atomic.Int32) *appcontroller.Controller {
	t.Helper()
	crdClient, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := appcontroller.NewController(
		e.crd.App().V1().Apps(), e.kube.Apps().V1().Deployments(), e.kube.Core().V1().Services(),
		e.kube.Networking().V1().Ingresses(), e.kube.Core().V1().Pods(),
		cp.Client, crdClient, &record.FakeRecorder{},
		appcontroller.Options{Common: controller.Common{Workers: 1, Queue: controller.PriorityQueue}},
	)
	if err != nil {
		t.Fatal(err)
	}
	c.Reconcile = func(ctx context.Context, _ controller.Key) (controller.Result, error) {
		started.Add(1)
		<-ctx.Done()
		return controller.Result{}, ctx.Err()
	}
	e.kube.Start(ctx.Done())
	e.crd.Start(ctx.Done())
	return c
}

// stop stops the informers, which cancel ends.
func (e *depthEnv) stop(cancel context.CancelFunc) {
	cancel()
	e.kube.Shutdown()
	e.crd.Shutdown()
}

// run runs c until the returned stop is called, which waits for it.
func run(ctx context.Context, c *appcontroller.Controller) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.Run(runCtx); close(done) }()
	return func() { cancel(); <-done }
}

// gauge reads the value of metric{label=value} from the registry /metrics
// serves; -1 when the series is absent.
func gauge(t *testing.T, metric, label, value string) int {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return int(m.GetGauge().GetValue())
				}
			}
		}
	}
	return -1
}

func workqueueDepth(t *testing.T) int {
	return gauge(t, "workqueue_depth", "name", appcontroller.ControllerName)
}

// After a controller loses its Lease with a backlog queued and is rebuilt
// (per-controller mode), workqueue_depth is what the new queue holds: the
// dead queue's keys are not counted on top.
func TestQueueDepthAfterRebuildWithBacklog(t *testing.T) {
	const backlog = 200
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	env := newDepthEnv(t, ctx, backlog)
	defer env.stop(cancel)

	var started atomic.Int32
	first := env.build(t, ctx, &started)
	framework.Eventually(t, timeout, "the initial list to be queued", func(context.Context) (bool, error) {
		return first.QueueLen() == backlog, nil
	})
	stopFirst := run(ctx, first)
	framework.Eventually(t, timeout, "the first controller's worker to take a key", func(context.Context) (bool, error) {
		return started.Load() == 1 && first.QueueLen() == backlog-1, nil
	})
	stopFirst() // the Lease is lost with backlog-1 keys queued

	rebuilt := env.build(t, ctx, &started)
	framework.Eventually(t, timeout, "the rebuilt controller to queue the cache's replay", func(context.Context) (bool, error) {
		return rebuilt.QueueLen() == backlog, nil
	})
	stopRebuilt := run(ctx, rebuilt)
	defer stopRebuilt()
	framework.Eventually(t, timeout, "the rebuilt controller's worker to take a key", func(context.Context) (bool, error) {
		return started.Load() == 2 && rebuilt.QueueLen() == backlog-1, nil
	})
	if got, want := workqueueDepth(t), rebuilt.QueueLen(); got != want {
		t.Fatalf("workqueue_depth{name=%q} = %d after the rebuild, want %d, what the rebuilt queue holds", appcontroller.ControllerName, got, want)
	}
	stopRebuilt()
	if got := workqueueDepth(t); got != 0 {
		t.Fatalf("workqueue_depth{name=%q} = %d once every queue is shut down, want 0", appcontroller.ControllerName, got)
	}
}

// A warm standby's queued keys are not a backlog (nobody is supposed to work
// them off there): workqueue_depth stays 0 until it leads, and
// controller_manager_standby_pending_keys says how many keys it holds.
func TestQueueDepthOnWarmStandby(t *testing.T) {
	const backlog = 200
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	env := newDepthEnv(t, ctx, backlog)
	defer env.stop(cancel)

	var started atomic.Int32
	standby := env.build(t, ctx, &started)
	framework.Eventually(t, timeout, "the initial list to be queued", func(context.Context) (bool, error) {
		return standby.QueueLen() == backlog, nil
	})
	pending := gauge(t, "controller_manager_standby_pending_keys", "controller", appcontroller.ControllerName)
	if got := workqueueDepth(t); got != 0 || pending != backlog {
		t.Fatalf("standing by with %d keys: workqueue_depth{name=%q} = %d, controller_manager_standby_pending_keys = %d; want 0 and %d",
			backlog, appcontroller.ControllerName, got, pending, backlog)
	}

	stop := run(ctx, standby) // it leads
	defer stop()
	framework.Eventually(t, timeout, "the leader's worker to take a key", func(context.Context) (bool, error) {
		return started.Load() == 1 && standby.QueueLen() == backlog-1, nil
	})
	pending = gauge(t, "controller_manager_standby_pending_keys", "controller", appcontroller.ControllerName)
	if got, want := workqueueDepth(t), standby.QueueLen(); got != want || pending != 0 {
		t.Fatalf("leading: workqueue_depth{name=%q} = %d, controller_manager_standby_pending_keys = %d; want %d and 0",
			appcontroller.ControllerName, got, pending, want)
	}
}
