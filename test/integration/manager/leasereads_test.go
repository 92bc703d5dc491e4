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
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// leaseCounts counts the Lease requests of the clients wrap wraps: GETs of
// single Leases, updates, and watches opened.
type leaseCounts struct{ reads, writes, watches atomic.Int64 }

func (c *leaseCounts) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		watch := r.URL.Query().Get("watch")
		switch {
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/leases/") && watch == "":
			c.reads.Add(1)
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/leases") && (watch == "true" || watch == "1"):
			c.watches.Add(1)
		case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/leases/"):
			c.writes.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

// Three replicas share 16 shard units. A replica's elector of a unit
// assigned elsewhere reads the Lease from its watch, not the API server:
// once every unit is led, the Leases are renewed (the holders write
// without reading) and barely read. Before, each replica read each Lease
// it did not hold every retry period, about 64 reads a second here, on the
// client that also renews (issue 36, Lease traffic). And a replica keeps
// one watch on the Leases for all its units' electors (plus membership's),
// not one per unit: 17 each here before.
func TestLeasesAssignedElsewhereAreNotPolled(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	const shards = 16
	registry := app.Registry{{
		Name:      "idle",
		ShardKeys: map[string]shard.Key{"configmaps": shard.Namespace},
		New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			return idle{name: cc.UnitName("idle")}, nil
		},
	}}
	var counts leaseCounts
	var replicas []*framework.Manager
	for range 3 {
		cfg := rest.CopyConfig(cp.Config)
		cfg.Wrap(counts.wrap)
		replicas = append(replicas, framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
			shortLease(ns, "reads")(o)
			o.Generic.Controllers = []string{"*"}
			o.HA.PerController = true
			o.HA.Shards = shards
			o.Generic.ShutdownTimeout = 10 * time.Second
		}, app.WithRESTConfig(cfg)))
	}
	framework.Eventually(t, 90*time.Second, "every shard led by one replica, each replica leading some", func(context.Context) (bool, error) {
		ledBy := map[string]int{}
		for i, m := range replicas {
			led := controllersLed(t, m)
			if len(led) == 0 {
				return false, nil
			}
			for c := range led {
				if _, dup := ledBy[c]; dup {
					return false, fmt.Errorf("%s led by two replicas", c)
				}
				ledBy[c] = i
			}
		}
		return len(ledBy) == shards, nil
	})

	// Measured over windows of 5 s, once the handovers that follow the
	// last join are over: 3 replicas × 16 Leases at a retry period of
	// 0.5 s would be 96 reads a second if every elector polled (the
	// client's rate limit holds it at about 40).
	window := 5 * time.Second
	var n int64
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("a window of %v with at most %d Lease reads", window, shards), func(context.Context) (bool, error) {
		before := counts.reads.Load()
		<-time.After(window)
		n = counts.reads.Load() - before
		t.Logf("%d Lease reads in %v by 3 replicas sharing %d shards (%.1f/s)", n, window, shards, float64(n)/window.Seconds())
		return n <= shards, nil
	})
	// One Lease watch per replica for the electors and one for membership;
	// one reconnect each is allowed for.
	if got, most := counts.watches.Load(), int64(3*(2+2)); got > most {
		t.Errorf("3 replicas sharing %d shards opened %d Lease watches, want at most %d", shards, got, most)
	} else {
		t.Logf("3 replicas sharing %d shards opened %d Lease watches", shards, got)
	}
}
