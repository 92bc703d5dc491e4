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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The shards of a replica that dies without releasing them (kill -9, a
// partition) are led again within a lease duration and a second of its
// death (issue 36): each survivor takes a shard assigned to it the moment
// its Lease expires, judged from when the watch delivered the last renewal,
// and drops the dead member the moment its member Lease expires. Before,
// the elector noticed at a jittered retry after a lease duration counted
// from its own first sight of the renewal, and membership at its next
// judging tick: up to about three retry periods late.
func TestShardsOfAKilledReplicaAreLedWithinALeaseDuration(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	const shards = 6
	const leaseDuration = 4 * time.Second
	registry, names := idleShards(shards)
	opts := func(o *options.Options) {
		shortLease(ns, "killed")(o)
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: leaseDuration}
		// A retry period long enough that noticing an expiry at the next
		// retry shows.
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: time.Second}
		o.Generic.Controllers = []string{"*"}
		o.HA.PerController = true
		o.HA.Shards = shards
		o.Generic.ShutdownTimeout = 10 * time.Second
	}
	cCfg, cut := cuttable(cp.Config)
	replicas := map[string]*framework.Manager{
		"a": framework.StartManagerWith(t, cp.Config, registry, opts),
		"b": framework.StartManagerWith(t, cp.Config, registry, opts),
		"c": framework.StartManagerWith(t, cCfg, registry, opts),
	}
	framework.Eventually(t, 90*time.Second, "a, b and c to share the shards", func(context.Context) (bool, error) {
		ledBy, err := ledByReplica(t, replicas)
		return err == nil && balanced(ledBy, names, replicas), err
	})

	for round := range 3 {
		// c is cut off, as good as killed: it renews and releases nothing.
		cut.Store(true)
		killed := time.Now()
		delete(replicas, "c")
		var ledBy map[string]string
		framework.Eventually(t, 60*time.Second, "a and b to lead every shard", func(context.Context) (bool, error) {
			var err error
			ledBy, err = ledByReplica(t, replicas)
			return err == nil && balanced(ledBy, names, replicas), err
		})
		took := time.Since(killed)
		t.Logf("round %d: every shard led by a or b %v after c was cut off: %s", round, took.Round(time.Millisecond), loads(ledBy))
		if took > leaseDuration+time.Second {
			t.Errorf("round %d: the shards of the dead replica were led again %v after it died, want at most the lease duration (%v) and a second",
				round, took.Round(time.Millisecond), leaseDuration)
		}
		// A new c starts (the dead one stays cut off), and takes its share.
		cCfg, cut = cuttable(cp.Config)
		replicas["c"] = framework.StartManagerWith(t, cCfg, registry, opts)
		framework.Eventually(t, 60*time.Second, "a, b and c to share the shards again", func(context.Context) (bool, error) {
			ledBy, err := ledByReplica(t, replicas)
			return err == nil && balanced(ledBy, names, replicas), err
		})
	}
}
