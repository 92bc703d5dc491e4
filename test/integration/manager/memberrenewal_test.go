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
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/pkg/membership"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A member renewal that hangs (no answer, as from a stalled connection)
// does not stop the renewals after it: it is given up after a third of the
// lease duration and the next one goes out, so the others never count the
// member gone and no unit moves (issue 36: member renewals on a timer of
// their own, with a per-request deadline). The hung request used to hold
// up the replica's one loop of renewing and judging until the others
// dropped it.
func TestHungMemberRenewalDoesNotDropTheMember(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	const leaseDuration = 6 * time.Second
	var stalled atomic.Bool
	stalling := rest.CopyConfig(cp.Config)
	stalling.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/leases/") && stalled.CompareAndSwap(false, true) {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return rt.RoundTrip(req)
		})
	})
	units := []string{"u1", "u2", "u3", "u4"}
	start := func(identity string, cfg *rest.Config) *membership.Members {
		m := membership.New(membership.Config{Client: kubernetes.NewForConfigOrDie(cfg), Namespace: ns, Group: "renewal",
			Identity: identity, Units: units, LeaseDuration: leaseDuration, JudgeInterval: 200 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := m.Run(ctx); err != nil {
				t.Errorf("member %s: %v", identity, err)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		return m
	}
	a := start("a", stalling)
	b := start("b", cp.Config)
	framework.Eventually(t, 10*time.Second, "b to see a and itself", func(context.Context) (bool, error) {
		return slices.Equal(b.Live(), []string{"a", "b"}), nil
	})
	owners := func() []string {
		var out []string
		for _, u := range units {
			out = append(out, b.Owner(u))
		}
		return out
	}
	before := owners()

	// a's first renewal, a third of the lease duration after it joined,
	// hangs; watch b for twice the lease duration from here.
	deadline := time.Now().Add(2 * leaseDuration)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if live := b.Live(); !slices.Contains(live, "a") {
			t.Fatalf("b counted a gone (live %v) after a's renewal hung", live)
		}
		if now := owners(); !slices.Equal(now, before) {
			t.Fatalf("units moved from %v to %v after a's renewal hung", before, now)
		}
		<-tick.C
	}
	if !stalled.Load() {
		t.Fatal("no renewal of a's hung: the test exercised nothing")
	}
	if !slices.Equal(a.Live(), []string{"a", "b"}) {
		t.Errorf("a sees %v, want a and b", a.Live())
	}
}
