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

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// TestKillLeaderMidWork kills the leader with SIGKILL while Apps are being
// created: the standby must lead within lease duration + 5 s, and every App,
// including those created while nobody led, must converge with exactly one
// Deployment (rolled out once) owned by it.
func TestKillLeaderMidWork(t *testing.T) {
	requireProcesses(t)
	ctx := context.Background()
	procs := startManagers(t, 2, shortLease.args()...)
	leader, others := waitForLeader(t, procs...)
	standby := others[0]
	ns := newNamespace(t)

	// Apps arrive at a steady pace for about 12 s, so that some are created
	// before the kill, most during the failover and some after it.
	const total = 30
	const pace = 400 * time.Millisecond
	createdAt := make([]time.Time, total)
	var createErr error
	// The killed leader also serves webhooks: a create it was admitting
	// when it died fails (the API server does not retry a webhook call) and
	// is retried here, as a client would. Their start times are checked.
	var webhookFailures []time.Time
	var creating sync.WaitGroup
	t.Cleanup(creating.Wait) // before the namespace is deleted, on failures too
	creating.Go(func() {
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for i := range total {
			app := newApp(fmt.Sprintf("app-%02d", i), 1, i%2 == 0)
			for {
				started := time.Now()
				_, err := cluster.Typed.AppV1beta1().Apps(ns).Create(ctx, app.DeepCopy(), metav1.CreateOptions{})
				if err != nil && isWebhookCallFailure(err) && len(webhookFailures) < 2 {
					webhookFailures = append(webhookFailures, started)
					t.Logf("creating App %s: %v; retrying", app.Name, err)
					continue
				}
				if err != nil {
					createErr = fmt.Errorf("creating App %s: %w", app.Name, err)
					return
				}
				break
			}
			createdAt[i] = time.Now()
			<-tick.C
		}
	})

	// Kill in the middle of work: the leader has created some Deployments.
	eventually(t, 30*time.Second, "the leader to create Deployments for 5 Apps", func(ctx context.Context) (bool, error) {
		list, err := cluster.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) >= 5, err
	})
	killed := time.Now()
	if err := leader.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	limit := shortLease.duration + 5*time.Second
	// Wait past the limit, so that a slow takeover is measured, not just failed.
	_, seen, err := framework.WaitForLeader(ctx, limit+15*time.Second, standby)
	if err != nil {
		t.Fatalf("the standby did not take over after the leader was killed: %v", err)
	}
	takeover := seen.Sub(killed)
	creating.Wait()
	if createErr != nil {
		t.Fatal(createErr)
	}
	// Only a call the victim may have been answering: started at most the
	// webhooks' timeout (5 s) before the kill and not after it had a
	// second to leave the balancer.
	for _, started := range webhookFailures {
		if started.Before(killed.Add(-5*time.Second)) || started.After(killed.Add(time.Second)) {
			t.Errorf("a create started %v after the kill failed calling the webhooks", started.Sub(killed).Round(time.Millisecond))
		}
	}
	var before, during int
	for _, at := range createdAt {
		switch {
		case at.Before(killed):
			before++
		case at.Before(seen):
			during++
		}
	}
	t.Logf("kill -9 failover: %s leads %v after %s was killed (lease duration %v, limit %v); Apps created before the kill: %d, during the failover: %d, after: %d",
		standby.Name, takeover.Round(10*time.Millisecond), leader.Name, shortLease.duration, limit, before, during, total-before-during)
	if takeover > limit {
		t.Errorf("takeover took %v, want at most lease duration + 5 s = %v", takeover.Round(10*time.Millisecond), limit)
	}
	if during == 0 {
		t.Errorf("no App was created during the failover: the scenario did not test what it means to")
	}
	if err := leader.Wait(5 * time.Second); err != nil || !strings.Contains(leader.ExitDescription(), "killed") {
		t.Errorf("the old leader: %s (%v), want killed by the signal", leader.ExitDescription(), err)
	}

	begin := time.Now()
	apps := waitAppsReady(t, ns, total, convergeTimeout)
	t.Logf("all %d Apps Ready %v after the takeover", total, time.Since(begin).Round(10*time.Millisecond))
	owners := map[types.UID]string{}
	for i := range apps {
		owners[apps[i].UID] = apps[i].Name
		checkAppChildren(t, ns, &apps[i])
	}
	// No duplicates anywhere in the namespace: one Deployment per App.
	deployments, err := cluster.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perOwner := map[types.UID]int{}
	for i := range deployments.Items {
		ref := metav1.GetControllerOf(&deployments.Items[i])
		if ref == nil || owners[ref.UID] != deployments.Items[i].Name {
			t.Errorf("Deployment %s is not controlled by its App: %+v", deployments.Items[i].Name, ref)
			continue
		}
		perOwner[ref.UID]++
	}
	if len(deployments.Items) != total || len(perOwner) != total {
		t.Errorf("%d Deployments for %d Apps (%d distinct owners), want exactly one each", len(deployments.Items), total, len(perOwner))
	}
}

// TestSIGTERMLeaderHandsOver stops the leader with SIGTERM: it must exit 0
// after releasing its Lease, and the standby, with the default 15 s lease
// duration, must lead within 5 s, which only a released Lease allows.
func TestSIGTERMLeaderHandsOver(t *testing.T) {
	requireProcesses(t)
	ctx := context.Background()
	procs := startManagers(t, 2, releaseLease.args()...)
	leader, others := waitForLeader(t, procs...)
	standby := others[0]
	ns := newNamespace(t)
	// The leader has informers running and work done when it is stopped.
	createApp(t, ns, newApp("before", 1, true))
	waitAppReady(t, ns, "before", convergeTimeout)

	sent := time.Now()
	if err := leader.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	const limit = 5 * time.Second
	// Wait longer than the lease duration, so that an unreleased Lease
	// shows as a measured handover of 15 s or more.
	_, seen, err := framework.WaitForLeader(ctx, releaseLease.duration+10*time.Second, standby)
	if err != nil {
		t.Fatalf("the standby did not take over after SIGTERM to the leader: %v", err)
	}
	handover := seen.Sub(sent)
	if err := leader.Wait(40 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM handover: %s leads %v after SIGTERM to %s, which exited (%s) after %v",
		standby.Name, handover.Round(10*time.Millisecond), leader.Name, leader.ExitDescription(),
		leader.ExitedAt().Sub(sent).Round(10*time.Millisecond))
	if handover > limit {
		t.Errorf("handover took %v, want at most %v (was the Lease released?)", handover.Round(10*time.Millisecond), limit)
	}
	if code := leader.ExitCode(); code != 0 {
		t.Errorf("the old leader exited with %s, want exit code 0", leader.ExitDescription())
	}
	if !leader.LogContains("released the lease") {
		t.Errorf("the old leader's log does not say it released the lease")
	}
	holder, err := cluster.LeaseHolder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if holder == "" || !standby.LogContains(holder) {
		t.Errorf("Lease holder %q is not the standby (its log does not name that identity)", holder)
	}

	// The new leader does the work.
	createApp(t, ns, newApp("after", 1, true))
	app := waitAppReady(t, ns, "after", convergeTimeout)
	checkAppChildren(t, ns, app)
}
