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

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	cleanupcontroller "github.com/ndsl/controller-manager/controllers/cleanup"
	ingresscontroller "github.com/ndsl/controller-manager/controllers/ingress"
	pipelinecontroller "github.com/ndsl/controller-manager/controllers/pipeline"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

// scenarioNameSpread is scenario 10: a Lease per controller over three
// replicas, and the re-election after kill -9 of one.
const scenarioNameSpread = "spread"

// spreadControllers are the four controllers, each under its own Lease.
var spreadControllers = []string{appcontroller.ControllerName, cleanupcontroller.ControllerName, ingresscontroller.ControllerName, pipelinecontroller.ControllerName}

// spreadReplicas is how many managers compete for the Leases.
const spreadReplicas = 3

// spreadResult is scenario 10.
type spreadResult struct {
	lease, renew, retry time.Duration
	objects             int
	// allLed is from the start of the first replica to all four Leases led.
	allLed time.Duration
	// joins are the second and third replicas', started one after the other.
	joins []joinResult
	// before and after are the division of the controllers over the
	// replicas, before the kill and once all four are led again.
	before, after map[string][]string
	victim        string
	// orphaned are the controllers the victim led.
	orphaned []string
	// reled is from the kill to all four controllers led by the survivors
	// (as their /debug/controllers says, polled every 50 ms); reledEach is
	// from the kill to each orphaned controller's. (The Leases' acquireTime
	// cannot tell: the election stamps it before the spread delay.)
	reled     time.Duration
	reledEach map[string]time.Duration
	// rebalanced is from the kill to the survivors leading two each.
	rebalanced time.Duration
}

// joinResult is one replica joining: from its start to the controllers
// divided evenly again, and how many changed leader on the way.
type joinResult struct {
	replica  string
	balanced time.Duration
	moved    int
}

// scenarioSpread starts three replicas with --leader-elect-per-controller
// and the four controllers one after the other, timing each join until the
// controllers are divided evenly again (membership hands them over), then
// kill -9s the replica leading most and times until the survivors lead all
// four, and lead two each.
func scenarioSpread(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (spreadResult, error) {
	logger := klog.FromContext(ctx)
	res := spreadResult{lease: cfg.leaseDuration, renew: cfg.renewDeadline, retry: cfg.retryPeriod, reledEach: map[string]time.Duration{}}
	const ns = "bench-spread"
	if err := c.createNamespace(ctx, ns); err != nil {
		return res, err
	}
	var err error
	if res.objects, _, err = c.cachedObjects(ctx); err != nil {
		return res, err
	}
	leasePrefix := fmt.Sprintf("bench-spread-%d", time.Now().Unix())
	begin := time.Now()
	var replicas []*binaryManager
	defer func() {
		for _, m := range replicas {
			_, _ = m.Terminate(time.Minute)
		}
	}()
	var led map[string]*binaryManager
	for i := range spreadReplicas {
		started := time.Now()
		m, err := startBinaryManager(ctx, l, fmt.Sprintf("spread-%d", i+1), append([]string{
			"--leader-elect=true", "--leader-elect-per-controller",
			"--controllers=*," + cleanupcontroller.ControllerName,
			"--leader-elect-resource-namespace=" + ns,
			"--leader-elect-resource-name=" + leasePrefix,
			"--leader-elect-lease-duration=" + cfg.leaseDuration.String(),
			"--leader-elect-renew-deadline=" + cfg.renewDeadline.String(),
			"--leader-elect-retry-period=" + cfg.retryPeriod.String(),
		}, cfg.managerArgs...)...)
		if err != nil {
			return res, err
		}
		replicas = append(replicas, m)
		if i == 0 {
			if led, err = waitAllLed(ctx, replicas, nil, cfg.leaseDuration+5*time.Minute, nil); err != nil {
				return res, err
			}
			res.allLed = time.Since(begin)
			logger.Info("Spread: all four controllers led by the first replica", "after", res.allLed)
			continue
		}
		before := led
		if led, err = waitEvenlyLed(ctx, replicas, nil, 5*time.Minute); err != nil {
			return res, fmt.Errorf("after %s joined: %w", m.Name(), err)
		}
		join := joinResult{replica: m.Name(), balanced: time.Since(started)}
		for name, r := range led {
			if before[name] != r {
				join.moved++
			}
		}
		res.joins = append(res.joins, join)
		logger.Info("Spread: a replica joined", "replica", m.Name(), "balancedAfter", join.balanced, "moved", join.moved, "division", divisionString(divide(led)))
	}
	res.before = divide(led)

	// The victim is the replica leading most; the first in order on a tie.
	var victim *binaryManager
	for _, m := range replicas {
		if victim == nil || len(res.before[m.Name()]) > len(res.before[victim.Name()]) {
			victim = m
		}
	}
	res.victim, res.orphaned = victim.Name(), res.before[victim.Name()]
	killed := time.Now()
	victim.Kill()
	if led, err = waitAllLed(ctx, replicas, victim, cfg.leaseDuration+5*time.Minute, func(name string) {
		if _, seen := res.reledEach[name]; !seen && slices.Contains(res.orphaned, name) {
			res.reledEach[name] = time.Since(killed)
		}
	}); err != nil {
		return res, fmt.Errorf("after kill -9 of %s: %w", victim.Name(), err)
	}
	res.reled = time.Since(killed)
	if led, err = waitEvenlyLed(ctx, replicas, victim, 5*time.Minute); err != nil {
		return res, fmt.Errorf("after kill -9 of %s: %w", victim.Name(), err)
	}
	res.rebalanced = time.Since(killed)
	res.after = divide(led)
	logger.Info("Spread: all four led again after kill -9", "victim", victim.Name(), "orphaned", res.orphaned,
		"after", res.reled, "each", res.reledEach, "division", divisionString(res.after))
	return res, nil
}

// waitAllLed polls the replicas other than skip until each of the four
// controllers is led by exactly one of them, and returns who leads which;
// seen, if not nil, gets every controller found led at each poll.
func waitAllLed(ctx context.Context, replicas []*binaryManager, skip *binaryManager, timeout time.Duration, seen func(name string)) (map[string]*binaryManager, error) {
	var led map[string]*binaryManager
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		led = map[string]*binaryManager{}
		for _, m := range replicas {
			if m == skip {
				continue
			}
			if exited, err := m.Exited(); exited {
				return false, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
			}
			d, err := getDebug(ctx, m.Base())
			if err != nil {
				return false, nil
			}
			for _, cs := range d.Controllers {
				if !cs.Leading {
					continue
				}
				if other, dup := led[cs.Name]; dup {
					return false, fmt.Errorf("controller %s led by both %s and %s", cs.Name, other.Name(), m.Name())
				}
				led[cs.Name] = m
				if seen != nil {
					seen(cs.Name)
				}
			}
		}
		for _, name := range spreadControllers {
			if led[name] == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the four controllers to be led: %w", err)
	}
	return led, nil
}

// waitEvenlyLed waits until the four controllers are led and the replicas
// other than skip lead as many each, or one more.
func waitEvenlyLed(ctx context.Context, replicas []*binaryManager, skip *binaryManager, timeout time.Duration) (map[string]*binaryManager, error) {
	deadline := time.Now().Add(timeout)
	for {
		led, err := waitAllLed(ctx, replicas, skip, time.Until(deadline), nil)
		if err != nil {
			return nil, err
		}
		live := 0
		for _, m := range replicas {
			if m != skip {
				live++
			}
		}
		counts := map[*binaryManager]int{}
		for _, m := range led {
			counts[m]++
		}
		lo, hi := len(spreadControllers), 0
		for _, m := range replicas {
			if m != skip {
				lo, hi = min(lo, counts[m]), max(hi, counts[m])
			}
		}
		if hi-lo <= 1 && live > 0 {
			return led, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// divide turns who leads which into the controllers of each replica.
func divide(led map[string]*binaryManager) map[string][]string {
	by := map[string][]string{}
	for name, m := range led {
		by[m.Name()] = append(by[m.Name()], name)
	}
	for _, cs := range by {
		slices.Sort(cs)
	}
	return by
}

// divisionString is "manager-spread-1: app,pipeline; manager-spread-2: ingress; …".
func divisionString(by map[string][]string) string {
	var parts []string
	for m, cs := range by {
		parts = append(parts, m+": "+strings.Join(cs, ","))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// divisionCounts is "2-1-1": Leases per replica, most first, over the
// replicas given (a replica leading none counts 0).
func divisionCounts(by map[string][]string, replicas int) string {
	counts := make([]int, 0, replicas)
	for _, cs := range by {
		counts = append(counts, len(cs))
	}
	for len(counts) < replicas {
		counts = append(counts, 0)
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, "-")
}

// spreadRow is scenario 10's row.
func spreadRow(s *spreadResult) row {
	var each []string
	for _, name := range s.orphaned {
		if d, ok := s.reledEach[name]; ok {
			each = append(each, fmt.Sprintf("%s %s", name, secs(d)))
		}
	}
	var joins []string
	for _, j := range s.joins {
		joins = append(joins, fmt.Sprintf("%s joined: even again after %s, %d moved", j.replica, secs(j.balanced), j.moved))
	}
	return row{
		number: "10", scenario: "A Lease per controller: 3 replicas joining one by one, kill -9 of one",
		size: fmt.Sprintf("%d cached objects, 4 controllers (cleanup included), 3 replicas; lease %s, renew %s, retry %s",
			s.objects, s.lease, s.renew, s.retry),
		raw: "—",
		manager: fmt.Sprintf("all four led %s after the first start; %s; divided %s (%s); kill -9 of %s (%d Leases): all four led again after %s, even again after %s, divided %s (%s)",
			secs(s.allLed), strings.Join(joins, "; "), divisionCounts(s.before, spreadReplicas), divisionString(s.before),
			s.victim, len(s.orphaned), secs(s.reled), secs(s.rebalanced),
			divisionCounts(s.after, spreadReplicas-1), divisionString(s.after)),
		ratio:  "—",
		writes: "—",
		where: fmt.Sprintf("the victim's controllers led again after: %s; expected: the lease duration plus up to one jittered retry period (membership counts the victim gone as its Leases expire); a join: the joiner's caches synced, then the holders drain what moves and the joiner takes each at its release",
			strings.Join(each, ", ")),
	}
}
