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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/membership"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// syncing is an idle controller that says whether the informers it reads
// have synced (app.CacheSyncer).
type syncing struct {
	idle
	synced []cache.InformerSynced
}

func (c syncing) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// In per-controller mode a controller whose caches cannot sync (here: its
// kind is not served, as when a CRD or an RBAC rule is missing) stops only
// itself: the replicas offer and lead the others, and /debug/controllers
// and the caches_synced metric name the one that cannot sync (issue 36,
// join per unit). A replica used to join only once every cache of every
// controller had synced, so no controller was ever led.
func TestControllerThatCannotSyncStopsOnlyItself(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	registry := app.Registry{
		{Name: "ready", New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			informer := cc.InformerFactory.Core().V1().ConfigMaps().Informer()
			return syncing{idle{name: "ready"}, []cache.InformerSynced{informer.HasSynced}}, nil
		}},
		{Name: "stuck", New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			missing := schema.GroupVersionResource{Group: "missing.example.com", Version: "v1", Resource: "widgets"}
			informer := cc.MetadataInformerFactory.ForResource(missing).Informer()
			return syncing{idle{name: "stuck"}, []cache.InformerSynced{informer.HasSynced}}, nil
		}},
	}
	replicas := map[string]*framework.Manager{}
	for _, r := range []string{"a", "b"} {
		replicas[r] = framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
			shortLease(ns, "cannot-sync")(o)
			o.Generic.Controllers = []string{"*"}
			o.HA.PerController = true
			o.Generic.ShutdownTimeout = time.Second // idle ignores the drain
		})
	}

	framework.Eventually(t, 30*time.Second, "ready led by one replica", func(context.Context) (bool, error) {
		ledBy, err := ledByReplica(t, replicas)
		return ledBy["ready"] != "", err
	})
	for r, m := range replicas {
		for _, c := range debugStatus(t, m).Controllers {
			if want := c.Name == "ready"; c.CachesSynced != want {
				t.Errorf("replica %s, /debug/controllers: %s cachesSynced %v, want %v", r, c.Name, c.CachesSynced, want)
			}
			if c.Name == "stuck" && (c.Leading || c.AssignedTo != "") {
				t.Errorf("replica %s: stuck is led (%v) or assigned (to %q), though no replica can sync its caches", r, c.Leading, c.AssignedTo)
			}
		}
	}
	// Each replica offers what it can run, and only that.
	framework.Eventually(t, 10*time.Second, "both member Leases to offer ready", func(ctx context.Context) (bool, error) {
		for r, m := range replicas {
			name := membership.LeaseName("cannot-sync", debugStatus(t, m).Identity)
			lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			switch got := lease.Annotations[membership.UnitsAnnotation]; got {
			case "ready":
			case "":
				return false, nil
			default:
				return false, fmt.Errorf("replica %s's member Lease offers %q, want ready", r, got)
			}
		}
		return true, nil
	})
	synced := map[string]float64{}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_manager_caches_synced" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "controller" {
					synced[l.GetValue()] = s.GetGauge().GetValue()
				}
			}
		}
	}
	if synced["ready"] != 1 || synced["stuck"] != 0 {
		t.Errorf("controller_manager_caches_synced: %v, want ready 1 and stuck 0", synced)
	}
	if _, ok := synced["stuck"]; !ok {
		t.Error("controller_manager_caches_synced has no series for stuck")
	}
}
