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
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// idle is a controller that does nothing until it is stopped.
type idle struct{ name string }

func (c idle) Name() string            { return c.name }
func (c idle) Run(ctx context.Context) { waitStop(ctx) }

// idleShards is a registry of one shardable controller, "idle", whose
// shards do nothing, and the unit names of its n shards.
func idleShards(n int) (app.Registry, []string) {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("idle-%d-of-%d", i, n))
	}
	return app.Registry{{
		Name:      "idle",
		ShardKeys: map[string]shard.Key{"configmaps": shard.Namespace},
		New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			return idle{name: cc.UnitName("idle")}, nil
		},
	}}, names
}

// waitStop returns once ctx is done or the controller is told to drain.
func waitStop(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-controller.GracefulStop(ctx):
	}
}

// A shard whose build fails gives its Lease back and competes again after
// a backoff (1 s, doubling), not in a loop of acquire, build and release
// that hammers the API server; once it builds, it is led (issue 36, churn).
func TestShardThatCannotBeBuiltBacksOff(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	var builds atomic.Int32
	var failing atomic.Bool
	failing.Store(true)
	registry := app.Registry{{
		Name:      "flaky",
		ShardKeys: map[string]shard.Key{"configmaps": shard.Namespace},
		New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			builds.Add(1)
			if failing.Load() {
				return nil, errors.New("this test's shard cannot be built")
			}
			return idle{name: cc.UnitName("flaky")}, nil
		},
	}}
	m := framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
		shortLease(ns, "flaky")(o)
		o.Generic.Controllers = []string{"*"}
		o.HA.PerController = true
		o.HA.Shards = 2
		o.Generic.ShutdownTimeout = 10 * time.Second
	})

	framework.Eventually(t, 30*time.Second, "a first build of a shard", func(context.Context) (bool, error) {
		return builds.Load() > 0, nil
	})
	// Two shards over 6 s: at most 1+1+2+4 s of backoff each, so 3 or 4
	// builds each; without a backoff, one every Lease round trip.
	first := builds.Load()
	window := 6 * time.Second
	<-time.After(window)
	if n := builds.Load() - first; n > 10 {
		t.Errorf("%d builds of 2 failing shards in %v; want at most 10 (a backoff between attempts)", n, window)
	} else {
		t.Logf("%d builds of 2 failing shards in %v", n, window)
	}

	failing.Store(false)
	framework.Eventually(t, 60*time.Second, "both shards led once they build", func(context.Context) (bool, error) {
		return len(controllersLed(t, m)) == 2, nil
	})
}
