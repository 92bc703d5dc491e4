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
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/layout/layouttest"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// leaseLayout is the flags of one Lease layout.
type leaseLayout struct {
	name          string
	perController bool
	shards        int
}

var (
	singleLayout        = leaseLayout{"single", false, 1}
	perControllerLayout = leaseLayout{"per-controller", true, 1}
	twoShards           = leaseLayout{"2 shards", true, 2}
	fourShards          = leaseLayout{"4 shards", true, 4}
)

// units are the units of the layout over the controllers "idle" (which
// shards) and "whole" (which does not).
func (l leaseLayout) units() []string {
	if !l.perController {
		return []string{"idle", "whole"}
	}
	if l.shards == 1 {
		return []string{"idle", "whole"}
	}
	out := []string{"whole"}
	for i := range l.shards {
		out = append(out, fmt.Sprintf("idle-%d-of-%d", i, l.shards))
	}
	return out
}

// layoutRegistry is a controller that shards and one that does not, both
// idle.
func layoutRegistry() app.Registry {
	return app.Registry{{
		Name:      "idle",
		ShardKeys: map[string]shard.Key{"configmaps": shard.Namespace},
		New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			return idle{name: cc.UnitName("idle")}, nil
		},
	}, {
		Name: "whole",
		New: func(context.Context, app.ControllerContext) (app.Controller, error) {
			return idle{name: "whole"}, nil
		},
	}}
}

// leases are the unit Leases of the layout in group "layouts", and its
// label value.
func (l leaseLayout) leases() ([]string, string) {
	if !l.perController {
		return []string{"layouts"}, layout.Of(false, 1, shard.KeyVersion)
	}
	var out []string
	for _, u := range l.units() {
		out = append(out, "layouts-"+u)
	}
	return out, layout.Of(true, l.shards, shard.KeyVersion)
}

func startLayout(t *testing.T, ns string, l leaseLayout) *framework.Manager {
	t.Helper()
	return framework.StartManagerWith(t, cp.Config, layoutRegistry(), func(o *options.Options) {
		shortLease(ns, "layouts")(o)
		// A retry period that would show: the new layout takes over at
		// once, not at its electors' next retry.
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 6 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 4 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 2 * time.Second}
		o.Generic.Controllers = []string{"*"}
		o.HA.PerController = l.perController
		o.HA.Shards = l.shards
		o.Generic.ShutdownTimeout = time.Second
	})
}

// leadsAll says whether m leads every unit of l.
func leadsAll(t *testing.T, m *framework.Manager, l leaseLayout) bool {
	led := controllersLed(t, m)
	for _, u := range l.units() {
		if !led[u] {
			return false
		}
	}
	return true
}

// A rolling update that changes the Lease layout: a replica of the new
// layout starts beside one of the old. The old keeps leading and the new
// acquires nothing, for longer than a lease duration; once the old replica
// stops, the new one leads every unit, and at no moment were Leases of two
// layouts held (issue 36, layout fence). Before the fence both led at once
// from the start.
func TestLayoutChangeHandsOverWithoutOverlap(t *testing.T) {
	for _, tc := range []struct{ from, to leaseLayout }{
		{singleLayout, perControllerLayout},
		{perControllerLayout, singleLayout},
		{perControllerLayout, twoShards},
		{twoShards, perControllerLayout},
		{twoShards, fourShards},
		{fourShards, twoShards},
	} {
		t.Run(tc.from.name+" to "+tc.to.name, func(t *testing.T) {
			t.Parallel()
			ns := framework.CreateNamespace(t, cp.Client)
			watch := layouttest.Start(t, cp.Client, ns, "layouts", nil)
			old := startLayout(t, ns, tc.from)
			framework.Eventually(t, 30*time.Second, "the old layout leads every unit", func(context.Context) (bool, error) {
				return leadsAll(t, old, tc.from), nil
			})
			next := startLayout(t, ns, tc.to)
			// Longer than a lease duration (6 s): the new replica has judged
			// every Lease it saw, and still acquires nothing.
			deadline := time.Now().Add(8 * time.Second)
			for time.Now().Before(deadline) {
				if led := controllersLed(t, next); len(led) > 0 {
					t.Fatalf("the new layout leads %v beside the old", slices.Sorted(maps.Keys(led)))
				}
				if !leadsAll(t, old, tc.from) {
					t.Fatal("the old layout stopped leading while its replica runs")
				}
				time.Sleep(200 * time.Millisecond)
			}
			stopped := time.Now()
			if err := old.Stop(); err != nil {
				t.Fatalf("stopping the old replica: %v", err)
			}
			framework.Eventually(t, 30*time.Second, "the new layout leads every unit", func(context.Context) (bool, error) {
				return leadsAll(t, next, tc.to), nil
			})
			t.Logf("%s to %s: every unit led %s after the old replica was told to stop", tc.from.name, tc.to.name, time.Since(stopped).Round(time.Millisecond))
			_, fromLayout := tc.from.leases()
			toLeases, _ := tc.to.leases()
			handover, ok := watch.Handover(fromLayout, toLeases)
			t.Logf("%s to %s: the old layout's last Lease released → the new one's last acquired: %v", tc.from.name, tc.to.name, handover.Round(time.Millisecond))
			if !ok || handover > time.Second {
				t.Errorf("%s to %s: the new layout acquired its last Lease %v after the old one's last release (seen: %v), want within a second, not at its next retry (2 to 4.4 s)",
					tc.from.name, tc.to.name, handover.Round(time.Millisecond), ok)
			}
			if overlaps := watch.Overlaps(); len(overlaps) > 0 {
				t.Errorf("Leases of two layouts held at once, %d times; first: %s", len(overlaps), overlaps[0])
			}
		})
	}
}

// A replica of a version before layouts (client-go's elector on the single
// Lease, unlabelled) leads; a replica with a Lease per controller starts
// beside it and acquires nothing while it renews. Once it releases, the new
// replica leads, and holds the old Lease as a tombstone, so that another
// replica of the old version, which knows no fence, waits instead of
// leading beside it; once the new replica is gone (a rollback), the old
// version leads again.
func TestLeasesOfVersionsBeforeLayoutsAreFenced(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	const group = "layouts"
	runOld := func(ctx context.Context, identity string, led *atomic.Bool) {
		lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: group},
			Client: cp.Client.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: identity}}
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { led.Store(true) },
				OnStoppedLeading: func() {},
			},
		})
	}
	oldCtx, stopOld := context.WithCancel(context.Background())
	defer stopOld()
	var oldLed atomic.Bool
	oldDone := make(chan struct{})
	go func() { defer close(oldDone); runOld(oldCtx, "old-version", &oldLed) }()
	framework.Eventually(t, 30*time.Second, "the old version leads", func(context.Context) (bool, error) { return oldLed.Load(), nil })

	next := startLayout(t, ns, perControllerLayout)
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if led := controllersLed(t, next); len(led) > 0 {
			t.Fatalf("the new layout leads %v beside the old version", slices.Sorted(maps.Keys(led)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopOld()
	<-oldDone
	framework.Eventually(t, 30*time.Second, "the new layout leads every unit", func(context.Context) (bool, error) {
		return leadsAll(t, next, perControllerLayout), nil
	})
	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(context.Background(), group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); !strings.HasPrefix(holder, "(fenced: layout per-controller") {
		t.Fatalf("the old version's Lease is held by %q, want the per-controller layout's tombstone", holder)
	}
	// Another replica of the old version waits, as for a live holder.
	againCtx, stopAgain := context.WithCancel(context.Background())
	defer stopAgain()
	var againLed atomic.Bool
	againDone := make(chan struct{})
	go func() { defer close(againDone); runOld(againCtx, "old-version-again", &againLed) }()
	deadline = time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if againLed.Load() {
			t.Fatal("a replica of the old version leads beside the new layout")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := next.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	framework.Eventually(t, 30*time.Second, "the old version leads again once the new layout is gone", func(context.Context) (bool, error) {
		return againLed.Load(), nil
	})
	t.Logf("the old version led again %v after the new layout's replica was told to stop", time.Since(stopped).Round(time.Millisecond))
	stopAgain()
	<-againDone
}
