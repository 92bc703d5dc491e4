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

package manager

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// writer is a controller that, while it runs, counts up in its own
// ConfigMap every 100 ms: a controller whose writes are easy to follow.
type writer struct {
	name, queue, ns string
	client          kubernetes.Interface
}

var writerQueues atomic.Int64

func writers(ns string, names ...string) app.Registry {
	var r app.Registry
	for _, name := range names {
		r = append(r, app.ControllerDescriptor{
			Name: name,
			New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
				client, err := cc.KubeClient(name)
				// Queue names label metrics: unique per replica in this process.
				queue := fmt.Sprintf("%s-%s-%d", name, ns, writerQueues.Add(1))
				return &writer{name: name, queue: queue, ns: ns, client: client}, err
			},
		})
	}
	return r
}

func (w *writer) Name() string { return w.name }

func (w *writer) Run(ctx context.Context) {
	queue := controller.NewQueue(w.queue)
	queue.Add(controller.Key{Name: "count"})
	worker := &controller.Worker{Name: w.name, Queue: queue, Reconcile: w.reconcile}
	worker.Run(ctx, 1)
}

func (w *writer) reconcile(ctx context.Context, _ controller.Key) (controller.Result, error) {
	again := controller.Result{RequeueAfter: 100 * time.Millisecond}
	cms := w.client.CoreV1().ConfigMaps(w.ns)
	cm, err := cms.Get(ctx, "writer-"+w.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "writer-" + w.name}, Data: map[string]string{"n": "1"}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return again, err
	}
	if err != nil {
		return again, err
	}
	n, _ := strconv.Atoi(cm.Data["n"])
	cm.Data["n"] = strconv.Itoa(n + 1)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return again, err
}

func writerCount(ctx context.Context, ns, name string) int {
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "writer-"+name, metav1.GetOptions{})
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(cm.Data["n"])
	return n
}

// controllerLeading reads, on m's /debug/controllers, which controllers it leads.
func controllersLed(t *testing.T, m *framework.Manager) map[string]bool {
	t.Helper()
	led := map[string]bool{}
	for _, c := range debugStatus(t, m).Controllers {
		if c.Leading && c.Running {
			led[c.Name] = true
		}
	}
	return led
}

// In per-controller mode two replicas share four controllers; stealing one
// controller's Lease stops that controller alone while the others go on
// writing, and SIGTERM releases every Lease the replica holds.
func TestPerControllerLeasesSpreadAndStopOneController(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	names := []string{"w1", "w2", "w3", "w4"}
	perController := func(o *options.Options) {
		shortLease(ns, "spread")(o)
		o.Generic.Controllers = []string{"*"}
		o.HA.PerController = true
		o.Generic.ShutdownTimeout = 10 * time.Second
	}
	a := framework.StartManagerWith(t, cp.Config, writers(ns, names...), perController)
	b := framework.StartManagerWith(t, cp.Config, writers(ns, names...), perController)
	replicas := map[string]*framework.Manager{"a": a, "b": b}

	var ledBy map[string]string // controller → replica
	// Divided 2-2, which is where the handovers after the replicas'
	// offers end (each keeps what it holds up to its share): a 3-1 on the
	// way has a Lease in hand-over.
	framework.Eventually(t, 60*time.Second, "the controllers divided 2-2", func(context.Context) (bool, error) {
		var err error
		if ledBy, err = ledByReplica(t, replicas); err != nil {
			return false, err
		}
		return balanced(ledBy, names, replicas), nil
	})
	t.Logf("controllers led: %v", ledBy)
	for _, c := range names {
		lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, "spread-"+c, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Fatalf("Lease spread-%s: %v (err %v)", c, lease.Spec.HolderIdentity, err)
		}
	}
	framework.Eventually(t, 30*time.Second, "every controller to write", func(ctx context.Context) (bool, error) {
		for _, c := range names {
			if writerCount(ctx, ns, c) < 3 {
				return false, nil
			}
		}
		return true, nil
	})

	// Steal w1's Lease from whoever leads it.
	holder := replicas[ledBy["w1"]]
	stealLease(t, ns, "spread-w1")
	framework.Eventually(t, 15*time.Second, "w1 to stop on its replica", func(context.Context) (bool, error) {
		return !controllersLed(t, holder)["w1"], nil
	})
	stopped := map[string]int{}
	for _, c := range names {
		stopped[c] = writerCount(ctx, ns, c)
	}
	framework.Eventually(t, 30*time.Second, "w2, w3 and w4 to write 5 more times each", func(ctx context.Context) (bool, error) {
		for _, c := range names[1:] {
			if writerCount(ctx, ns, c) < stopped[c]+5 {
				return false, nil
			}
		}
		return true, nil
	})
	if n := writerCount(ctx, ns, "w1"); n != stopped["w1"] {
		t.Errorf("w1 wrote %d times after its Lease was stolen", n-stopped["w1"])
	}
	select {
	case <-holder.Done():
		t.Fatalf("the replica that lost w1's Lease stopped: %v", holder.Err())
	default:
	}
	led := controllersLed(t, holder)
	for _, c := range names[1:] {
		if ledBy[c] == ledBy["w1"] && !led[c] {
			t.Errorf("%s stopped on the replica that lost only w1's Lease", c)
		}
	}

	// SIGTERM (Stop) drains, then releases every Lease a holds.
	identities := map[string]string{}
	for _, c := range names {
		lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, "spread-"+c, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		identities[c] = *lease.Spec.HolderIdentity
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("a's shutdown returned %v", err)
	}
	for _, c := range names {
		if ledBy[c] != "a" || c == "w1" {
			continue
		}
		lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, "spread-"+c, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := lease.Spec.HolderIdentity; h != nil && *h == identities[c] {
			t.Errorf("Lease spread-%s still names the stopped replica %s", c, *h)
		}
	}
}
