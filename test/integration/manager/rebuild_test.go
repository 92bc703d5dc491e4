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
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// In per-controller mode a controller that lost its Lease is rebuilt on the
// running informers and competes again. Every real controller must survive
// that and work afterwards: the Pipeline controller's
// rebuild used to fail on its informer's indexes ("indexer conflict"), so
// the replica never led it again.
func TestPerControllerRebuildsEveryControllerAfterLosingItsLease(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	controllers := []string{"app", "pipeline", "ingress"}
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		shortLease(ns, "rebuild")(o)
		o.Generic.Controllers = controllers
		o.HA.PerController = true
		o.Generic.ShutdownTimeout = 10 * time.Second
	})
	allLed := func(context.Context) (bool, error) {
		led := controllersLed(t, m)
		for _, c := range controllers {
			if !led[c] {
				return false, nil
			}
		}
		return true, nil
	}
	framework.Eventually(t, 60*time.Second, "the replica to lead every controller", allLed)

	for _, c := range controllers {
		// Longer than the renew deadline, so that the replica loses the
		// Lease, and short enough for it to win it back soon after.
		stealLeaseFor(t, ns, "rebuild-"+c, 5*time.Second)
		framework.Eventually(t, 15*time.Second, c+" to stop after its Lease was taken", func(context.Context) (bool, error) {
			return !controllersLed(t, m)[c], nil
		})
		framework.Eventually(t, 30*time.Second, c+" to be rebuilt and led again", func(context.Context) (bool, error) {
			return controllersLed(t, m)[c], nil
		})
	}
	select {
	case <-m.Done():
		t.Fatalf("the manager stopped: %v", m.Err())
	default:
	}

	// The rebuilt Ingress controller works.
	if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, annotatedService(ns, "after-rebuilds"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the rebuilt Ingress controller to create the Ingress", func(ctx context.Context) (bool, error) {
		_, err := cp.Client.NetworkingV1().Ingresses(ns).Get(ctx, "after-rebuilds", metav1.GetOptions{})
		return err == nil, nil
	})
}

// A controller that cannot be rebuilt after losing its Lease must not leave
// the replica up without ever competing for it again: the manager stops
// the other controllers, which release their Leases, and returns the error
// (the binary exits 1 and is restarted).
func TestPerControllerStopsWhenAControllerCannotBeRebuilt(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	registry := writers(ns, "w1", "w2")
	var builds atomic.Int32
	newW2 := registry[1].New
	registry[1].New = func(ctx context.Context, cc app.ControllerContext) (app.Controller, error) {
		if builds.Add(1) > 1 {
			return nil, errors.New("injected: cannot build w2 again")
		}
		return newW2(ctx, cc)
	}
	m := framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
		shortLease(ns, "unbuildable")(o)
		o.Generic.Controllers = []string{"*"}
		o.HA.PerController = true
		o.Generic.ShutdownTimeout = 10 * time.Second
	})
	framework.Eventually(t, 60*time.Second, "the replica to lead both controllers", func(context.Context) (bool, error) {
		led := controllersLed(t, m)
		return led["w1"] && led["w2"], nil
	})

	stealLeaseFor(t, ns, "unbuildable-w2", 5*time.Second)
	select {
	case <-m.Done():
		if err := m.Err(); err == nil || !strings.Contains(err.Error(), "cannot build w2 again") {
			t.Fatalf("the manager returned %v, want the rebuild's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager stayed up after it could not rebuild w2")
	}
	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, "unbuildable-w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("w1's Lease is still held by %s after the manager stopped", *h)
	}
}
