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
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

func leading(t *testing.T, m *framework.Manager) bool {
	t.Helper()
	status, body, err := m.Get("/debug/controllers")
	if err != nil || status != 200 {
		t.Fatalf("GET /debug/controllers: %d %v", status, err)
	}
	var debug struct {
		Leading bool `json:"leading"`
	}
	if err := json.Unmarshal([]byte(body), &debug); err != nil {
		t.Fatal(err)
	}
	return debug.Leading
}

// With the default lease duration (15 s), a takeover within 5 s is only
// possible because the leader releases its Lease when it stops.
func TestOnlyOneLeadsAndReleaseOnCancelHandsOverFast(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	withElection := func(o *options.Options) {
		o.Generic.Controllers = []string{ingress.ControllerName}
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = ns
		o.LeaderElection.ResourceName = "handover-test"
	}

	first := framework.StartManager(t, cp.Config, withElection)
	framework.Eventually(t, 30*time.Second, "the first manager to lead", func(context.Context) (bool, error) {
		return leading(t, first), nil
	})
	if _, body, err := first.Get("/metrics"); err != nil || !strings.Contains(body, `leader_election_master_status{name="handover-test"} 1`) {
		t.Errorf("the leader's /metrics lacks leader_election_master_status = 1 (err %v)", err)
	}
	second := framework.StartManager(t, cp.Config, withElection)

	// The second manager keeps trying every retry period (2 s); over three
	// periods it must never lead while the first holds the Lease.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if leading(t, second) {
			t.Fatal("two managers lead at once")
		}
		time.Sleep(200 * time.Millisecond)
	}
	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, "handover-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	firstHolder := *lease.Spec.HolderIdentity

	stopped := time.Now()
	if err := first.Stop(); err != nil {
		t.Fatalf("a clean shutdown returned %v, want nil", err)
	}
	framework.Eventually(t, 5*time.Second, "the second manager to take over within 5 s", func(context.Context) (bool, error) {
		return leading(t, second), nil
	})
	t.Logf("takeover %s after the leader was cancelled", time.Since(stopped).Round(10*time.Millisecond))

	lease, err = cp.Client.CoordinationV1().Leases(ns).Get(ctx, "handover-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == firstHolder {
		t.Errorf("Lease holder = %v, want the second manager", lease.Spec.HolderIdentity)
	}
}

// A leader whose Lease is taken over (here: stolen by hand) must stop its
// controllers and return ErrLeaderElectionLost, which makes the binary exit
// non-zero, rather than go on reconciling without the lease.
func TestLosingTheLeaseStopsTheManager(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{ingress.ControllerName}
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = ns
		o.LeaderElection.ResourceName = "stolen"
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 3 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 500 * time.Millisecond}
	})
	framework.Eventually(t, 30*time.Second, "the manager to lead", func(context.Context) (bool, error) {
		return leading(t, m), nil
	})

	stealLease(t, ns, "stolen")
	leases := cp.Client.CoordinationV1().Leases(ns)

	select {
	case <-m.Done():
		if err := m.Err(); !errors.Is(err, app.ErrLeaderElectionLost) {
			t.Fatalf("Run returned %v, want ErrLeaderElectionLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the manager kept running after losing its Lease")
	}
	if lease, err := leases.Get(ctx, "stolen", metav1.GetOptions{}); err != nil || *lease.Spec.HolderIdentity != "thief" {
		t.Errorf("the Lease changed hands again after the loss: %v %v", lease.Spec.HolderIdentity, err)
	}
}
