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

package cleanup

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Issue 21, item 5: the stale period runs on across a leader change. The
// leader that first finds an orphan stale records the time on it; when it
// stops in the middle of the period, the next leader, with nothing in
// memory, removes the orphan at that time plus the period, not a whole
// period after it took over.
func TestStalenessSurvivesALeaderChange(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	const period = 8 * time.Second
	client := cp.Client
	ns := newDanglingFamily(t, client)
	cfg := framework.ServiceAccountWithClusterRoles(t, cp, ns, "components/cleanup/cleanup-controller.yaml", "rbac/leader-election.yaml")
	leader := func(o *options.Options) {
		sweeper(false)(o)
		o.Cleanup.StalePeriod = period
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = ns
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 3 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 500 * time.Millisecond}
	}

	startedAt := time.Now() // the children are stale from the first sweep on
	first := framework.StartManager(t, cfg, leader)
	want := sweeps(t) + 2
	framework.Eventually(t, 30*time.Second, "the first leader to sweep", func(context.Context) (bool, error) {
		return sweeps(t) >= want, nil
	})
	// A standby, which has never swept: it takes over with nothing in memory.
	framework.StartManager(t, cfg, leader)
	framework.Eventually(t, period, "half the stale period to pass", func(context.Context) (bool, error) {
		return time.Since(startedAt) >= period/2, nil
	})
	ctx := context.Background()
	d, err := client.AppsV1().Deployments(ns).Get(ctx, "orphan-deploy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	since, err := time.Parse(time.RFC3339, d.Annotations["ndsl.cn/stale-since"])
	if err != nil {
		t.Errorf("the first leader recorded no stale-since time on Deployment orphan-deploy: annotations %v", d.Annotations)
		since = startedAt
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	changedAt := time.Now()

	for _, o := range orphans {
		framework.Eventually(t, 3*period, o.kind+" "+o.name+" to be removed", func(ctx context.Context) (bool, error) {
			found, err := exists(ctx, client, ns, o.kind, o.name)
			return !found, err
		})
	}
	gone := time.Now()
	// RFC 3339 keeps whole seconds: since may be up to a second early.
	if gone.Before(since.Add(period)) {
		t.Errorf("orphans removed %s after they were first found stale, before the stale period of %s", gone.Sub(since), period)
	}
	// A sweep a second, a leader change of a moment: well within 2 s of
	// since+period; a new clock at the change would take until changedAt+period.
	if late := gone.Sub(since.Add(period)); late > 3*time.Second {
		t.Errorf("orphans removed %s after the leader change (%s after they were first found stale, %s past the stale period of %s): "+
			"the new leader restarted the stale period", gone.Sub(changedAt).Round(100*time.Millisecond),
			gone.Sub(since).Round(100*time.Millisecond), late.Round(100*time.Millisecond), period)
	}
}
