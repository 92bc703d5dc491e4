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

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A standby tries for the Lease once per retry period (here 20 s, so its
// second try is at least 20 s after its first). When the leader shuts down
// and releases the Lease a few seconds after the standby's first try, only
// the standby's watch on the Lease can make it take over within 3 s: its
// elector would not try again for another 17 s or more.
func TestStandbyTakesOverAReleasedLeaseBeforeItsNextRetry(t *testing.T) {
	for _, perController := range []bool{false, true} {
		t.Run(fmt.Sprintf("per-controller=%v", perController), func(t *testing.T) {
			ns := framework.CreateNamespace(t, cp.Client)
			const name = "wake"
			lease := ingressLease(name, perController)
			withElection := func(o *options.Options) {
				o.Generic.Controllers = []string{ingress.ControllerName}
				o.LeaderElection.LeaderElect = true
				o.LeaderElection.ResourceNamespace = ns
				o.LeaderElection.ResourceName = name
				o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 60 * time.Second}
				o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 40 * time.Second}
				o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 20 * time.Second}
				o.HA.Standby = options.StandbyWarm
				o.HA.PerController = perController
			}
			holder := func(ctx context.Context) (string, error) {
				l, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
				if err != nil || l.Spec.HolderIdentity == nil {
					return "", err
				}
				return *l.Spec.HolderIdentity, nil
			}

			first := framework.StartManager(t, cp.Config, withElection)
			var firstID string
			framework.Eventually(t, 30*time.Second, "the first manager to hold the Lease", func(ctx context.Context) (bool, error) {
				id, err := holder(ctx)
				firstID = id
				return id != "", err
			})
			second := framework.StartManager(t, cp.Config, withElection)
			// The election starts once the standby's caches are synced, and
			// its first try is immediate: it finds the Lease held.
			framework.Eventually(t, 30*time.Second, "the standby to sync", func(context.Context) (bool, error) {
				status, _, err := second.Get("/readyz/informer-sync")
				return status == 200 && debugStatus(t, second).Synced, err
			})
			if err := first.Stop(); err != nil {
				t.Fatalf("a clean shutdown returned %v, want nil", err)
			}
			released := time.Now()
			framework.Eventually(t, 3*time.Second, "the standby to hold the released Lease within 3 s", func(ctx context.Context) (bool, error) {
				id, err := holder(ctx)
				return id != "" && id != firstID, err
			})
			t.Logf("the standby held the Lease %s after the leader returned", time.Since(released).Round(time.Millisecond))
			framework.Eventually(t, 10*time.Second, "the standby to lead", func(context.Context) (bool, error) {
				return debugStatus(t, second).Leading, nil
			})
		})
	}
}
