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
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// ledControllers reads which controllers each process leads; a controller
// led by two at once is an error.
func ledControllers(ctx context.Context, procs []*framework.Process) (map[string]*framework.Process, error) {
	led := map[string]*framework.Process{}
	for _, p := range procs {
		if p.Exited() {
			continue
		}
		d, err := p.Debug(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range d.Controllers {
			if !c.Leading {
				continue
			}
			if other, dup := led[c.Name]; dup {
				return nil, fmt.Errorf("controller %s led by both %s and %s", c.Name, other.Name, p.Name)
			}
			led[c.Name] = p
		}
	}
	return led, nil
}

func division(led map[string]*framework.Process) string {
	by := map[string][]string{}
	for c, p := range led {
		by[p.Name] = append(by[p.Name], c)
	}
	var parts []string
	for p, cs := range by {
		sort.Strings(cs)
		parts = append(parts, fmt.Sprintf("%s: %s", p, strings.Join(cs, ",")))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// evenlyLed says whether every one of n controllers is led, and each
// process still running leads as many as the others, or one more.
func evenlyLed(led map[string]*framework.Process, procs []*framework.Process, n int) bool {
	if len(led) != n {
		return false
	}
	per := map[*framework.Process]int{}
	for _, p := range led {
		per[p]++
	}
	lo, hi := n, 0
	for _, p := range procs {
		if !p.Exited() {
			lo, hi = min(lo, per[p]), max(hi, per[p])
		}
	}
	return hi-lo <= 1
}

// TestPerControllerLeases runs three replicas with a Lease per controller
// (four controllers, cleanup included): the replicas share the controllers
// evenly (2-1-1), every one works, and after kill -9 of the replica leading
// most of them the survivors lead all four again within lease duration +
// 10 s, and end 2-2.
func TestPerControllerLeases(t *testing.T) {
	requireProcesses(t)
	ctx := context.Background()
	const controllers = 4
	grantCleanupRBAC(t)
	args := append(shortLease.args(), "--leader-elect-per-controller", "--leader-elect-resource-name=e2e-per-controller",
		"--controllers=*,cleanup")
	procs := startManagers(t, 3, args...)

	var led map[string]*framework.Process
	eventually(t, leaderTimeout, "all four controllers led, evenly", func(ctx context.Context) (bool, error) {
		var err error
		led, err = ledControllers(ctx, procs)
		return err == nil && evenlyLed(led, procs, controllers), err
	})
	t.Logf("per-controller Leases divided as %s", division(led))
	perProc := map[*framework.Process]int{}
	for _, p := range led {
		perProc[p]++
	}
	_, body, err := led["app"].Get(ctx, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if line := metricLine(string(body), `leader_election_master_status{name="e2e-per-controller-app"}`); !strings.HasSuffix(line, " 1") {
		t.Errorf("the app controller's leader reports %q, want leader_election_master_status{name=\"e2e-per-controller-app\"} 1", line)
	}
	if line := metricLine(string(body), `controller_manager_members{group="e2e-per-controller"}`); !strings.HasSuffix(line, " 3") {
		t.Errorf("the app controller's leader reports %q, want controller_manager_members{group=\"e2e-per-controller\"} 3", line)
	}

	ns := newNamespace(t)
	createApp(t, ns, newApp("before", 1, true))
	app := waitAppReady(t, ns, "before", convergeTimeout)
	checkAppChildren(t, ns, app)

	var victim *framework.Process
	for p, n := range perProc {
		if victim == nil || n > perProc[victim] {
			victim = p
		}
	}
	killed := time.Now()
	if err := victim.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	limit := shortLease.duration + 10*time.Second
	eventually(t, limit+30*time.Second, "the survivors to lead all four controllers", func(ctx context.Context) (bool, error) {
		var err error
		led, err = ledControllers(ctx, procs)
		if err != nil {
			return false, err
		}
		for _, p := range led {
			if p == victim {
				return false, nil
			}
		}
		return len(led) == controllers, nil
	})
	relead := time.Since(killed)
	t.Logf("kill -9 of %s (%d Leases): all four led again after %v (lease duration %v), divided as %s",
		victim.Name, perProc[victim], relead.Round(10*time.Millisecond), shortLease.duration, division(led))
	if relead > limit {
		t.Errorf("all four controllers led again only after %v, want at most %v", relead.Round(10*time.Millisecond), limit)
	}
	eventually(t, 30*time.Second, "the survivors to share the controllers evenly", func(ctx context.Context) (bool, error) {
		var err error
		led, err = ledControllers(ctx, procs)
		return err == nil && evenlyLed(led, procs, controllers), err
	})
	t.Logf("the survivors divide them as %s", division(led))
	for _, p := range led {
		_, body, err := p.Get(ctx, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if line := metricLine(string(body), `controller_manager_members{group="e2e-per-controller"}`); !strings.HasSuffix(line, " 2") {
			t.Errorf("survivor %s reports %q, want controller_manager_members{group=\"e2e-per-controller\"} 2", p.Name, line)
		}
		if line := metricLine(string(body), `controller_manager_assigned_units{group="e2e-per-controller"}`); !strings.HasSuffix(line, " 2") {
			t.Errorf("survivor %s reports %q, want controller_manager_assigned_units{group=\"e2e-per-controller\"} 2", p.Name, line)
		}
	}

	createApp(t, ns, newApp("after", 1, true))
	app = waitAppReady(t, ns, "after", convergeTimeout)
	checkAppChildren(t, ns, app)
}
