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
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

// scenarioNameFlood is scenario 9: a fresh change under a flood of queued keys.
const scenarioNameFlood = "flood"

// floodQueues are compared side by side, in this order.
var floodQueues = []controller.QueueKind{controller.FIFOQueue, controller.PriorityQueue}

// floodTarget is the target for the priority queue.
const floodTarget = time.Second

// floodNamespace holds the flood's Apps, the fresh ones and the Leases.
const floodNamespace = "bench-flood"

// floodResult is scenario 9: per size, per queue kind, one run.
type floodResult struct {
	retry time.Duration
	// kcmPaused: kube-controller-manager was stopped (SIGSTOP) for the
	// whole scenario.
	kcmPaused bool
	sizes     []floodSize
}

type floodSize struct {
	apps int
	runs map[controller.QueueKind]floodRun
}

// floodRun is one warm standby of the App controller taking over with
// every App of the cluster queued, and one App created at once after the
// takeover.
type floodRun struct {
	// standbyDepth is the App queue's depth on the standby before the
	// Lease was released: the whole initial list, waiting for the Lease.
	standbyDepth int
	// queued is the App queue's depth (workqueue_depth) read after the
	// standby led and before the fresh App was created; low and high split
	// it (workqueue_depth_by_priority; the FIFO queue has no such split:
	// -1).
	queued, low, high int
	// ledAfter is from the release of the Lease to the standby leading,
	// createdAfter from it leading to the fresh App's create returning.
	ledAfter, createdAfter time.Duration
	// firstReconcile is from the create to the fresh App's Deployment
	// arriving on a watch: its first reconcile's first write. appSeen is
	// from the create to the App itself arriving on a watch of this
	// command's: what the API server's watch path alone takes.
	firstReconcile, appSeen time.Duration
	// leftBehind is the App queue's depth read once the fresh App's
	// Deployment arrived: keys of the pass that the fresh App overtook
	// (about 0 with the FIFO, which served it last).
	leftBehind int
	// drained is from the create to the App queue being empty.
	drained time.Duration
	// idle is the same first reconcile for an App created once the pass
	// had drained: what the create, the reconcile and the watches take on
	// this machine with nothing queued, the floor of firstReconcile.
	idle time.Duration
	// background is the cluster's write rate before the run, objects/s.
	background float64
}

// floodApp is an App of the flood: a Deployment of no pods, so that
// converging 20,000 of them costs the cluster as little as it can.
func floodApp(name string) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0), Port: 80},
	}
}

// scenarioFlood grows a namespace to each size of Apps and converges them
// with an App-only manager. Then, for each queue kind, a warm standby of
// the App controller syncs its cache while the benchmark holds its Lease,
// so that every App of the cluster waits in its queue at low priority (the
// initial list), as on a real standby; the benchmark releases the Lease,
// and as soon as the standby leads, creates one App and times its first
// reconcile.
func scenarioFlood(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (floodResult, error) {
	logger := klog.FromContext(ctx)
	res := floodResult{retry: cfg.retryPeriod}
	if err := c.createNamespace(ctx, floodNamespace); err != nil {
		return res, err
	}
	// kube-controller-manager follows new Deployments at 20 QPS: 20,000 of
	// them would keep it busy for an hour, and each status it writes
	// re-queues the App at high priority and costs the manager a status
	// write, so the Apps would never be idle, and the flood would measure
	// that stream instead of the backlog. Paused, it leaves the cluster as
	// it is once caught up.
	if pid, ok := childProcesses()["kube-controller-manager"]; ok && c.local != nil {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return res, fmt.Errorf("pausing kube-controller-manager: %w", err)
		}
		res.kcmPaused = true
		logger.Info("Flood: kube-controller-manager paused", "pid", pid)
		defer func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				logger.Error(err, "Resuming kube-controller-manager")
			}
		}()
	}
	have := 0
	for _, n := range cfg.floodSizes {
		logger.Info("Flood: creating Apps", "from", have, "to", n)
		if err := parallel(ctx, n-have, 4*cfg.concurrency, func(ctx context.Context, i int) error {
			_, err := c.crd.AppV1beta1().Apps(floodNamespace).Create(ctx, floodApp(fmt.Sprintf("flood-%05d", have+i)), metav1.CreateOptions{})
			return ignoreExists(err)
		}); err != nil {
			return res, fmt.Errorf("creating the flood Apps: %w", err)
		}
		have = n
		begin := time.Now()
		if err := convergeFlood(ctx, l, cfg, n); err != nil {
			return res, err
		}
		logger.Info("Flood: Apps converged", "apps", n, "took", time.Since(begin).Round(time.Second))
		size := floodSize{apps: n, runs: map[controller.QueueKind]floodRun{}}
		for _, kind := range floodQueues {
			rate, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout)
			if err != nil {
				return res, err
			}
			run, err := floodOnce(ctx, c, cfg, l, n, kind)
			if err != nil {
				return res, fmt.Errorf("flood of %d Apps, %s queue: %w", n, kind, err)
			}
			run.background = rate
			logger.Info("Flood measured", "apps", n, "queue", kind, "standbyDepth", run.standbyDepth,
				"queued", run.queued, "low", run.low, "high", run.high, "ledAfter", run.ledAfter, "createdAfter", run.createdAfter,
				"firstReconcile", run.firstReconcile, "appSeen", run.appSeen, "leftBehind", run.leftBehind, "drained", run.drained, "idle", run.idle, "backgroundWritesPerSecond", rate)
			size.runs[kind] = run
		}
		res.sizes = append(res.sizes, size)
	}
	return res, nil
}

// convergeFlood runs an App-only manager until it is idle with every App
// converged, so that the measured takeovers write nothing but the fresh
// App's children.
func convergeFlood(ctx context.Context, l *e2eframework.Launcher, cfg config, n int) error {
	m, err := startBinaryManager(ctx, l, fmt.Sprintf("flood-converge-%d", n),
		append([]string{"--leader-elect=false", "--controllers=" + appcontroller.ControllerName}, cfg.managerArgs...)...)
	if err != nil {
		return err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	return waitManagerReady(ctx, m, cfg.phaseTimeout, 3*time.Second)
}

// floodHolder holds the flood's Leases until the benchmark releases them.
const floodHolder = "bench-scale-flood"

func floodOnce(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, n int, kind controller.QueueKind) (floodRun, error) {
	var run floodRun
	ns := floodNamespace
	stamp := time.Now().Unix()
	fresh := fmt.Sprintf("fresh-%s-%d-%d", kind, n, stamp)
	leaseName := fmt.Sprintf("bench-flood-%s-%d-%d", kind, n, stamp)
	leases := c.kube.CoordinationV1().Leases(ns)
	now := metav1.NowMicro()
	if _, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(floodHolder), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		return run, fmt.Errorf("creating Lease %s: %w", leaseName, err)
	}
	defer func() { _ = leases.Delete(context.WithoutCancel(ctx), leaseName, metav1.DeleteOptions{}) }()

	deployments, err := c.kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + fresh})
	if err != nil {
		return run, err
	}
	defer deployments.Stop()
	apps, err := c.crd.AppV1beta1().Apps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + fresh})
	if err != nil {
		return run, err
	}
	defer apps.Stop()
	idleApp := fmt.Sprintf("idle-%s-%d-%d", kind, n, stamp)
	idleDeployments, err := c.kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + idleApp})
	if err != nil {
		return run, err
	}
	defer idleDeployments.Stop()

	m, err := startBinaryManager(ctx, l, fmt.Sprintf("flood-%s-%d", kind, n), append([]string{
		"--leader-elect=true", "--standby=warm",
		"--leader-elect-resource-namespace=" + ns,
		"--leader-elect-resource-name=" + leaseName,
		"--leader-elect-lease-duration=" + cfg.leaseDuration.String(),
		"--leader-elect-renew-deadline=" + cfg.renewDeadline.String(),
		"--leader-elect-retry-period=" + cfg.retryPeriod.String(),
		"--controllers=" + appcontroller.ControllerName, "--controller-queue=" + string(kind),
	}, cfg.managerArgs...)...)
	if err != nil {
		return run, err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	if err := waitManagerReady(ctx, m, cfg.phaseTimeout, 0); err != nil {
		return run, err
	}
	// The standby's informer has listed every App; its handlers queued
	// them all, and no worker takes any until it leads.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := getDebug(ctx, m.Base())
		if err != nil {
			return false, nil
		}
		if d.Leading {
			return false, fmt.Errorf("manager %s leads while the benchmark holds Lease %s", m.Name(), leaseName)
		}
		q, err := appQueue(ctx, m)
		if err != nil {
			return false, nil
		}
		run.standbyDepth = q.standby // a standby's keys are not in workqueue_depth
		return q.standby >= n, nil
	})
	if err != nil {
		return run, fmt.Errorf("waiting for the standby to queue the %d Apps (depth %d): %w", n, run.standbyDepth, err)
	}

	lease, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return run, err
	}
	// What a leader's release writes: no holder, a 1 s lease.
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = ptr.To(""), ptr.To[int32](1)
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return run, fmt.Errorf("releasing Lease %s: %w", leaseName, err)
	}
	released := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, cfg.leaseDuration+time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, err := m.Exited(); exited {
			return false, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		d, err := getDebug(ctx, m.Base())
		return err == nil && d.Leading, nil
	})
	if err != nil {
		return run, fmt.Errorf("waiting for the standby to take Lease %s: %w", leaseName, err)
	}
	led := time.Now()
	run.ledAfter = led.Sub(released)
	q, err := appQueue(ctx, m)
	if err != nil {
		return run, err
	}
	run.queued, run.low, run.high = q.depth, q.low, q.high
	if _, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, floodApp(fresh), metav1.CreateOptions{}); err != nil {
		return run, err
	}
	created := time.Now()
	run.createdAfter = created.Sub(led)
	// The backlog must still be there when the fresh App arrives, or this
	// measures nothing: at least half of the Apps still queued.
	if run.queued < n/2 {
		return run, fmt.Errorf("only %d of the %d Apps were still queued when the fresh App was created; the takeover pass was no flood", run.queued, n)
	}
	timeout := time.After(5 * time.Minute)
	for run.firstReconcile == 0 || run.appSeen == 0 {
		select {
		case ev, ok := <-deployments.ResultChan():
			if !ok {
				return run, fmt.Errorf("the watch on Deployment %s/%s closed", ns, fresh)
			}
			if ev.Type == watch.Added && run.firstReconcile == 0 {
				run.firstReconcile = time.Since(created)
				q, err := appQueue(ctx, m)
				if err != nil {
					return run, err
				}
				run.leftBehind = q.depth
			}
		case ev, ok := <-apps.ResultChan():
			if !ok {
				return run, fmt.Errorf("the watch on App %s/%s closed", ns, fresh)
			}
			if ev.Type == watch.Added && run.appSeen == 0 {
				run.appSeen = time.Since(created)
			}
		case <-timeout:
			return run, fmt.Errorf("no Deployment for the fresh App %s within 5 minutes", fresh)
		case <-ctx.Done():
			return run, ctx.Err()
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 25*time.Millisecond, cfg.phaseTimeout, true, func(ctx context.Context) (bool, error) {
		q, err := appQueue(ctx, m)
		return err == nil && q.depth == 0, nil
	})
	if err != nil {
		return run, fmt.Errorf("waiting for the pass to drain: %w", err)
	}
	run.drained = time.Since(created)

	// The floor: the same for an App created with nothing queued.
	if _, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, floodApp(idleApp), metav1.CreateOptions{}); err != nil {
		return run, err
	}
	idleCreated := time.Now()
	for run.idle == 0 {
		select {
		case ev, ok := <-idleDeployments.ResultChan():
			if !ok {
				return run, fmt.Errorf("the watch on Deployment %s/%s closed", ns, idleApp)
			}
			if ev.Type == watch.Added {
				run.idle = time.Since(idleCreated)
			}
		case <-time.After(time.Minute):
			return run, fmt.Errorf("no Deployment for the App %s within a minute", idleApp)
		case <-ctx.Done():
			return run, ctx.Err()
		}
	}
	// Every run creates its own Apps; these and their children go.
	for _, name := range []string{fresh, idleApp} {
		if err := c.crd.AppV1beta1().Apps(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			return run, err
		}
	}
	return run, nil
}

// queueDepth is one scrape of the App controller's queue metrics.
type queueDepth struct {
	depth, low, high int
	// standby is controller_manager_standby_pending_keys: the keys a
	// standby holds outside its workqueue until it leads.
	standby int
}

// appQueue reads workqueue_depth, workqueue_depth_by_priority and
// controller_manager_standby_pending_keys of the App controller's queue
// from m's /metrics; low and high are -1 when the queue does not split its
// depth (the FIFO).
func appQueue(ctx context.Context, m manager) (queueDepth, error) {
	ms, err := scrape(ctx, m.Base())
	if err != nil {
		return queueDepth{}, err
	}
	q := queueDepth{low: -1, high: -1}
	found := false
	for _, s := range ms {
		if s.name == "controller_manager_standby_pending_keys" && s.labels["controller"] == appcontroller.ControllerName {
			q.standby = int(s.value)
			continue
		}
		if s.labels["name"] != appcontroller.ControllerName {
			continue
		}
		switch s.name {
		case "workqueue_depth":
			q.depth, found = int(s.value), true
		case "workqueue_depth_by_priority":
			switch s.labels["priority"] {
			case "low":
				q.low = int(s.value)
			case "high":
				q.high = int(s.value)
			}
		}
	}
	if !found {
		return q, fmt.Errorf("manager %s has no workqueue_depth{name=%q}", m.Name(), appcontroller.ControllerName)
	}
	return q, nil
}

// floodRows are scenario 9's rows, one per size, and the target's verdicts.
func floodRows(f *floodResult) ([]row, []verdict) {
	var rows []row
	var verdicts []verdict
	kcm := "; kube-controller-manager running (an existing cluster)"
	if f.kcmPaused {
		kcm = "; kube-controller-manager paused (SIGSTOP) for the scenario, so that it does not re-queue the Apps by following their Deployments"
	}
	for _, s := range f.sizes {
		fifo, prio := s.runs[controller.FIFOQueue], s.runs[controller.PriorityQueue]
		var parts []string
		for _, kind := range floodQueues {
			r := s.runs[kind]
			split := ""
			if r.low >= 0 {
				split = fmt.Sprintf(" (%d low, %d high)", r.low, r.high)
			}
			parts = append(parts, fmt.Sprintf("%s: %d keys queued on the standby, %d%s left when the fresh App was created %s after the takeover (Lease released → led %s), %d still queued when its Deployment arrived; the pass drained %s after the create; an App created then, with nothing queued, was first reconciled after %s; the fresh App itself reached a watch %s after its create returned; cluster background %.1f writes/s",
				kind, r.standbyDepth, r.queued, split, secs(r.createdAfter), secs(r.ledAfter), r.leftBehind, secs(r.drained), secs(r.idle), secs(r.appSeen), r.background))
		}
		rows = append(rows, row{
			number: "9", scenario: "Fresh change under a flood: one App created right after a warm standby takes over with every App queued",
			size:    fmt.Sprintf("%d converged Apps (a Deployment of 0 pods each), App controller only, retry %s", s.apps, f.retry),
			raw:     fmt.Sprintf("fifo queue: first reconcile after %s", secs(fifo.firstReconcile)),
			manager: fmt.Sprintf("priority queue: first reconcile after %s", secs(prio.firstReconcile)),
			ratio:   fmt.Sprintf("target < %s with the priority queue: %s", secs(floodTarget), check(prio.firstReconcile < floodTarget)),
			writes:  "—",
			where:   strings.Join(parts, "; ") + "; first reconcile = create to the fresh App's Deployment arriving on a watch" + kcm,
		})
		verdicts = append(verdicts, verdict{fmt.Sprintf("Fresh change under a flood of %d keys < 1 s with the priority queue", s.apps),
			prio.firstReconcile < floodTarget, fmt.Sprintf("%s (fifo: %s)", secs(prio.firstReconcile), secs(fifo.firstReconcile))})
	}
	return rows, verdicts
}

// parseFloodSizes reads --flood-sizes: ascending positive counts.
func parseFloodSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err != nil || n < 2 {
			return nil, fmt.Errorf("--flood-sizes: %q is not a count of at least 2", f)
		}
		sizes = append(sizes, n)
	}
	if !slices.IsSorted(sizes) {
		return nil, fmt.Errorf("--flood-sizes must be ascending, got %s", s)
	}
	return sizes, nil
}
