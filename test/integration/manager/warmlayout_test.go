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
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/layout/layouttest"
	"github.com/ndsl/controller-manager/pkg/membership"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A layout change moves shards warm too (issue 36): the successor, fenced
// while the old layout leads, builds the new layout's shards and syncs
// their caches, and the last replica of the old layout, on SIGTERM, hands
// its shards over only once the successor states them warm. Before, it
// released them at once, as the last replica of its layout, and the
// successor started them cold (in this test, each a second before its
// caches synced).
func TestLayoutChangeMovesShardsWarm(t *testing.T) {
	leaseNS := framework.CreateNamespace(t, cp.Client)
	createServices(t, 8, 150)
	log := &startLog{}
	start := func(replica string, shards int) *framework.Manager {
		registry := app.Registry{{
			Name:      "cached",
			ShardKeys: map[string]shard.Key{"services": shard.Namespace},
			New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
				informer := cc.InformerFactory.Core().V1().Services().Informer()
				return &slowCaching{caching: caching{name: cc.UnitName("cached"), replica: replica, informer: informer, starts: log}}, nil
			},
		}}
		return framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
			shortLease(leaseNS, "relayout")(o)
			o.Generic.Controllers = []string{"*"}
			o.HA.PerController = true
			o.HA.Shards = shards
			o.Generic.ShutdownTimeout = 10 * time.Second
		})
	}
	a := start("a", 2)
	framework.Eventually(t, 60*time.Second, "a leads both shards", func(context.Context) (bool, error) {
		return len(controllersLed(t, a)) == 2, nil
	})
	releases := layouttest.Start(t, cp.Client, leaseNS, "relayout", nil)
	b := start("b", 4)
	// As a Deployment rolls: the predecessor's SIGTERM once the successor
	// runs (its member Lease is there), not once its caches have synced,
	// which its readiness does not wait for.
	successor := layout.Of(true, 4, shard.KeyVersion)
	framework.Eventually(t, 30*time.Second, "b's member Lease", func(ctx context.Context) (bool, error) {
		leases, err := cp.Client.CoordinationV1().Leases(leaseNS).List(ctx, metav1.ListOptions{LabelSelector: layout.Label + "=" + successor})
		if err != nil {
			return false, err
		}
		for _, l := range leases.Items {
			if l.Labels[membership.GroupLabel] != "" {
				return true, nil
			}
		}
		return false, nil
	})
	stopped := time.Now()
	if err := a.Stop(); err != nil {
		t.Fatalf("a's shutdown returned %v", err)
	}
	framework.Eventually(t, 60*time.Second, "b leads every shard of its layout", func(context.Context) (bool, error) {
		return len(controllersLed(t, b)) == 4, nil
	})
	onB := 0
	for _, s := range log.all() {
		if s.replica != "b" {
			continue
		}
		onB++
		t.Logf("%s started on b %v after a got SIGTERM, %v after a's last release; its cache synced: %v (%d Services)", s.unit,
			s.at.Sub(stopped).Round(time.Millisecond), s.at.Sub(lastRelease(releases)).Round(time.Millisecond), s.synced, s.cached)
		if !s.synced {
			t.Errorf("%s started on b with its cache not synced: the layout change moved it cold", s.unit)
		}
	}
	if onB != 4 {
		t.Errorf("%d shards started on b, want its 4", onB)
	}
}

// slowCaching is caching whose caches take a second longer to sync, as a
// range of tens of thousands of objects would: a successor that starts a
// shard before is seen to.
type slowCaching struct {
	caching
	informerSynced atomic.Int64 // when this first saw its informer synced
}

const slowSync = time.Second

func (c *slowCaching) HasSynced() bool {
	if !c.informer.HasSynced() {
		return false
	}
	c.informerSynced.CompareAndSwap(0, time.Now().UnixNano())
	return time.Since(time.Unix(0, c.informerSynced.Load())) >= slowSync
}

func (c *slowCaching) Run(ctx context.Context) {
	c.starts.add(start{unit: c.name, replica: c.replica, at: time.Now(), synced: c.HasSynced(), cached: len(c.informer.GetStore().ListKeys())})
	waitStop(ctx)
}

// lastRelease is when the last of the old layout's shard Leases was released.
func lastRelease(releases *layouttest.Watch) time.Time {
	var last time.Time
	for i := range 2 {
		if at := releases.Released(fmt.Sprintf("relayout-cached-%d-of-2", i)); at.After(last) {
			last = at
		}
	}
	return last
}
