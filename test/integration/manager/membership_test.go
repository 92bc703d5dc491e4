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
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// ledByReplica maps each controller to the replica leading it, failing the
// condition if two lead one controller at once.
func ledByReplica(t *testing.T, replicas map[string]*framework.Manager) (map[string]string, error) {
	ledBy := map[string]string{}
	for r, m := range replicas {
		for c := range controllersLed(t, m) {
			if other, dup := ledBy[c]; dup {
				return nil, fmt.Errorf("%s led by both %s and %s", c, other, r)
			}
			ledBy[c] = r
		}
	}
	return ledBy, nil
}

// balanced says whether every controller is led, and each replica leads
// as many as the others, or one more.
func balanced(ledBy map[string]string, names []string, replicas map[string]*framework.Manager) bool {
	if len(ledBy) != len(names) {
		return false
	}
	load := map[string]int{}
	for _, r := range ledBy {
		load[r]++
	}
	lo, hi := len(names), 0
	for r := range replicas {
		lo, hi = min(lo, load[r]), max(hi, load[r])
	}
	return hi-lo <= 1
}

func loads(ledBy map[string]string) string {
	per := map[string][]string{}
	for c, r := range ledBy {
		per[r] = append(per[r], c)
	}
	var out []string
	for r, cs := range per {
		sort.Strings(cs)
		out = append(out, fmt.Sprintf("%s:%v", r, cs))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// cuttable is a REST config whose requests all fail once cut: the replica
// is partitioned from the API server, as good as killed to the others.
func cuttable(cfg *rest.Config) (*rest.Config, *atomic.Bool) {
	var cut atomic.Bool
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if cut.Load() {
				return nil, errors.New("partitioned from the API server")
			}
			return rt.RoundTrip(req)
		})
	})
	return c, &cut
}

// Replicas started apart share the controllers evenly; a joiner takes its
// share, a replica that stops hands its controllers to the others at once,
// and a replica cut off loses them after the lease.
func TestReplicasStartedApartEndBalanced(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	names := []string{"w1", "w2", "w3", "w4"}
	perController := func(o *options.Options) {
		shortLease(ns, "members")(o)
		o.Generic.Controllers = []string{"*"}
		o.HA.PerController = true
		o.Generic.ShutdownTimeout = 10 * time.Second
	}
	replicas := map[string]*framework.Manager{}
	waitBalanced := func(what string, timeout time.Duration) map[string]string {
		t.Helper()
		var ledBy map[string]string
		start := time.Now()
		framework.Eventually(t, timeout, what, func(context.Context) (bool, error) {
			var err error
			if ledBy, err = ledByReplica(t, replicas); err != nil {
				return false, err
			}
			return balanced(ledBy, names, replicas), nil
		})
		t.Logf("%s after %s: %s", what, time.Since(start).Round(100*time.Millisecond), loads(ledBy))
		return ledBy
	}

	replicas["a"] = framework.StartManagerWith(t, cp.Config, writers(ns, names...), perController)
	waitBalanced("a alone leads every controller", 30*time.Second)

	replicas["b"] = framework.StartManagerWith(t, cp.Config, writers(ns, names...), perController)
	waitBalanced("a and b lead two controllers each", 30*time.Second)

	cCfg, cut := cuttable(cp.Config)
	replicas["c"] = framework.StartManagerWith(t, cCfg, writers(ns, names...), perController)
	ledBy := waitBalanced("a, b and c share the four controllers", 30*time.Second)
	for _, c := range names {
		framework.Eventually(t, 30*time.Second, c+" to write under its new leader", func(ctx context.Context) (bool, error) {
			return writerCount(ctx, ns, c) > 0, nil
		})
	}

	// a stops (SIGTERM): its controllers move to b and c as it releases them.
	if err := replicas["a"].Stop(); err != nil {
		t.Fatalf("a's shutdown returned %v", err)
	}
	delete(replicas, "a")
	waitBalanced("b and c lead two controllers each after a stopped", 30*time.Second)

	// c is cut off from the API server: b leads everything after the lease.
	_ = ledBy
	cut.Store(true)
	delete(replicas, "c")
	waitBalanced("b leads every controller after c was cut off", 60*time.Second)
}
