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
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// One replica holding all 64 shard Leases renews each once per retry
// period (2 s): 32 updates a second, beyond the default --kube-api-qps of
// 20. The Lease client's limit is raised to what its Leases need, so the
// renewals go out on time; they used to be held at 20 a second, each
// waiting about 1.2 s on the client (issue 36, a budget of its own).
func TestLeaseClientKeepsUpWithEveryRenewal(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	const shards = 64
	retry := 2 * time.Second
	registry := app.Registry{{
		Name:      "idle",
		ShardKeys: map[string]shard.Key{"configmaps": shard.Namespace},
		New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			return idle{name: cc.UnitName("idle")}, nil
		},
	}}
	var counts leaseCounts
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 20, 30 // the flags' defaults
	cfg.Wrap(counts.wrap)
	m := framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = ns
		o.LeaderElection.ResourceName = "budget"
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 15 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 10 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: retry}
		o.Generic.Controllers = []string{"*"}
		o.HA.PerController = true
		o.HA.Shards = shards
		o.Generic.ShutdownTimeout = time.Second // idle ignores the drain
	}, app.WithRESTConfig(cfg))
	framework.Eventually(t, 60*time.Second, "every shard led", func(context.Context) (bool, error) {
		return len(controllersLed(t, m)) == shards, nil
	})

	// Renewals alone are shards / retry a second; allow 15% for jitter.
	window := 5 * retry
	want := 0.85 * shards / retry.Seconds()
	before := counts.writes.Load()
	<-time.After(window)
	got := float64(counts.writes.Load()-before) / window.Seconds()
	t.Logf("%.1f Lease updates a second for %d Leases renewed every %v", got, shards, retry)
	if got < want {
		t.Errorf("%.1f Lease updates a second, want at least %.1f: renewals wait on the client's rate limit", got, want)
	}
}
