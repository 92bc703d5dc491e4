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

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// When a replica stops, the survivors keep every shard they lead and share
// only its shards (issue 36, churn). The assignment alone moved about one
// survivor's shard in ten, each a drain, a release and a cold start.
func TestSurvivorsKeepTheirShardsWhenAReplicaStops(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	const shards = 16
	registry, names := idleShards(shards)
	replicas := map[string]*framework.Manager{}
	for _, r := range []string{"a", "b", "c", "d"} {
		replicas[r] = framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
			shortLease(ns, "survivors")(o)
			o.Generic.Controllers = []string{"*"}
			o.HA.PerController = true
			o.HA.Shards = shards
			o.Generic.ShutdownTimeout = 10 * time.Second
		})
	}
	waitBalanced := func(what string) map[string]string {
		t.Helper()
		var ledBy map[string]string
		framework.Eventually(t, 90*time.Second, what, func(context.Context) (bool, error) {
			var err error
			if ledBy, err = ledByReplica(t, replicas); err != nil {
				return false, err
			}
			return balanced(ledBy, names, replicas), nil
		})
		t.Logf("%s: %s", what, loads(ledBy))
		return ledBy
	}
	before := waitBalanced("four replicas share the 16 shards")

	if err := replicas["a"].Stop(); err != nil {
		t.Fatalf("a's shutdown returned %v", err)
	}
	delete(replicas, "a")
	after := waitBalanced("b, c and d share them after a stopped")
	for s, was := range before {
		if was != "a" && after[s] != was {
			t.Errorf("%s moved from %s, a survivor, to %s", s, was, after[s])
		}
	}
}
