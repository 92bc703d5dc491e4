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
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// TestAPIServerRestart restarts kube-apiserver under two managers. The
// managers must not crash-loop: a process may only exit because it lost the
// Lease, and then non-zero; restarted once, as a kubelet would, it must stay
// up. Changes made right after the restart must converge. Whether the leader
// keeps its Lease depends on how long the API server is away (about 3 s
// here) against the renew deadline, so both cases run: the manifests' 10 s,
// which the leader survives, and 1 s, which it does not.
func TestAPIServerRestart(t *testing.T) {
	requireProcesses(t)
	if !cluster.Local() {
		t.Skip("restarts kube-apiserver: only on the local control plane")
	}
	t.Run("default lease", func(t *testing.T) { testAPIServerRestart(t, defaultLease) })
	outage := leaseSettings{duration: 2 * time.Second, renew: time.Second, retry: 250 * time.Millisecond}
	t.Run("renew deadline shorter than the outage", func(t *testing.T) { testAPIServerRestart(t, outage) })
}

func testAPIServerRestart(t *testing.T, lease leaseSettings) {
	ctx := context.Background()
	procs := startManagers(t, 2, lease.args()...)
	leader, _ := waitForLeader(t, procs...)
	ns := newNamespace(t)
	createApp(t, ns, newApp("before", 1, true))
	waitAppReady(t, ns, "before", convergeTimeout)

	begin := time.Now()
	if err := cluster.ControlPlane.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("kube-apiserver stopped and ready again in %v", restarted.Sub(begin).Round(10*time.Millisecond))

	// Changes right after the restart: a new App, a scaled App and a new
	// annotated Service.
	createApp(t, ns, newApp("after", 2, true))
	eventually(t, 30*time.Second, "scaling App before to 2", func(ctx context.Context) (bool, error) {
		app, err := cluster.Typed.AppV1beta1().Apps(ns).Get(ctx, "before", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		app.Spec.Replicas = ptr.To[int32](2)
		_, err = cluster.Typed.AppV1beta1().Apps(ns).Update(ctx, app, metav1.UpdateOptions{})
		return err == nil, err
	})
	svc := annotatedService("web-after")
	eventually(t, 30*time.Second, "creating Service web-after", func(ctx context.Context) (bool, error) {
		var err error
		svc, err = cluster.Kube.CoreV1().Services(ns).Create(ctx, annotatedService("web-after"), metav1.CreateOptions{})
		return err == nil, err
	})

	for _, name := range []string{"before", "after"} {
		app := waitAppReady(t, ns, name, convergeTimeout)
		checkAppChildren(t, ns, app)
	}
	waitIngress(t, ns, svc, convergeTimeout)
	t.Logf("changes made after the restart converged %v after it", time.Since(restarted).Round(10*time.Millisecond))

	// A leader that lost its Lease to the restart (an outage longer than
	// its renew deadline, or renewals refused while the restarted API
	// server loads its RBAC) leaves through its lame duck, unready, seconds
	// later. Wait until the Lease was renewed after the restart and every
	// process is ready or gone, so that such an exit is counted here and
	// not taken for a crash loop below (a CI rehearsal lost the Lease 4 s
	// after the API server was ready again, 13 s after it stopped).
	eventually(t, 60*time.Second, "the Lease renewed after the restart, and every manager ready or gone", func(ctx context.Context) (bool, error) {
		lease, err := cluster.Kube.CoordinationV1().Leases(framework.ManagerNamespace).Get(ctx, framework.LeaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(restarted) {
			return false, nil
		}
		for _, p := range procs {
			if p.Exited() {
				continue
			}
			if code, _, err := p.Get(ctx, "/readyz"); err != nil || code != http.StatusOK {
				return false, nil
			}
		}
		return true, nil
	})

	// What the restart did to the processes; restart those that exited.
	var alive []*framework.Process
	for _, p := range procs {
		role := "standby"
		if p == leader {
			role = "leader"
		}
		if !p.Exited() {
			t.Logf("%s (%s before the restart) kept running", p.Name, role)
			alive = append(alive, p)
			continue
		}
		t.Logf("%s (%s before the restart) exited %v after the restart began: %s", p.Name, role,
			p.ExitedAt().Sub(begin).Round(10*time.Millisecond), p.ExitDescription())
		if p.ExitCode() <= 0 {
			t.Errorf("%s exited with %s, want a non-zero exit code", p.Name, p.ExitDescription())
		}
		if !p.LogContains("leader election lost") {
			t.Errorf("%s exited, and not because it lost the Lease; last lines:\n%s", p.Name, p.LogTail(20))
		}
		again, err := p.Restart(ctx)
		if err != nil {
			t.Fatalf("restarting %s: %v", p.Name, err)
		}
		trackProcess(t, again)
		alive = append(alive, again)
	}

	// No crash loop: one of them leads and works, and none exits meanwhile.
	now, _ := waitForLeader(t, alive...)
	createApp(t, ns, newApp("after-recovery", 1, false))
	waitAppReady(t, ns, "after-recovery", convergeTimeout)
	t.Logf("%s leads after the restart", now.Name)
	for _, p := range alive {
		if p.Exited() {
			t.Errorf("%s exited (%s): crash loop", p.Name, p.ExitDescription())
			continue
		}
		if code, body, err := p.Get(ctx, "/healthz"); err != nil || code != http.StatusOK {
			t.Errorf("%s /healthz: %d %s %v", p.Name, code, body, err)
		}
	}
}
