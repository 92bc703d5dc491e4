package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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

// floodResult is scenario 9: per size, per queue kind, one run.
type floodResult struct {
	sizes []floodSize
}

type floodSize struct {
	apps int
	runs map[controller.QueueKind]floodRun
}

// floodRun is one manager started over apps converged Apps, with one App
// created while its pass over them is queued.
type floodRun struct {
	// queued is the App queue's depth when the fresh App was created.
	queued int
	// firstReconcile is from the create to the fresh App's Deployment
	// arriving on a watch: its first reconcile and its first write.
	firstReconcile time.Duration
	// drained is from the create to the App queue being empty.
	drained time.Duration
}

// floodApp is the i-th App of the flood: a Deployment of no pods only, so
// that converging 20,000 of them costs the cluster as little as possible.
func floodApp(name string) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0), Port: 80},
	}
}

// scenarioFlood grows a namespace to each size of Apps, converges them
// with a manager, then for each queue kind starts a fresh manager (the
// initial list is its pass: every App queued at low priority, as a new
// leader's would be) and, as soon as at least half of that pass is queued,
// creates one App and times its first reconcile.
func scenarioFlood(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (floodResult, error) {
	logger := klog.FromContext(ctx)
	var res floodResult
	const ns = "bench-flood"
	if err := c.createNamespace(ctx, ns); err != nil {
		return res, err
	}
	have := 0
	for _, n := range cfg.floodSizes {
		logger.Info("Flood: creating Apps", "from", have, "to", n)
		if err := parallel(ctx, n-have, 4*cfg.concurrency, func(ctx context.Context, i int) error {
			_, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, floodApp(fmt.Sprintf("flood-%05d", have+i)), metav1.CreateOptions{})
			return ignoreExists(err)
		}); err != nil {
			return res, fmt.Errorf("creating the flood Apps: %w", err)
		}
		have = n
		if err := convergeFlood(ctx, l, cfg, n); err != nil {
			return res, err
		}
		size := floodSize{apps: n, runs: map[controller.QueueKind]floodRun{}}
		for _, kind := range floodQueues {
			if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
				return res, err
			}
			run, err := floodOnce(ctx, c, cfg, l, ns, n, kind)
			if err != nil {
				return res, fmt.Errorf("flood of %d Apps, %s queue: %w", n, kind, err)
			}
			logger.Info("Flood measured", "apps", n, "queue", kind, "queued", run.queued,
				"firstReconcile", run.firstReconcile, "drained", run.drained)
			size.runs[kind] = run
		}
		res.sizes = append(res.sizes, size)
	}
	return res, nil
}

// convergeFlood runs an App-only manager until every App is converged and
// it is idle, so that the measured passes write nothing but the fresh App.
func convergeFlood(ctx context.Context, l *e2eframework.Launcher, cfg config, n int) error {
	m, err := startBinaryManager(ctx, l, fmt.Sprintf("flood-converge-%d", n),
		append([]string{"--leader-elect=false", "--controllers=" + appcontroller.ControllerName}, cfg.managerArgs...)...)
	if err != nil {
		return err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	return waitManagerReady(ctx, m, cfg.phaseTimeout, 3*time.Second)
}

func floodOnce(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, ns string, n int, kind controller.QueueKind) (floodRun, error) {
	var run floodRun
	fresh := fmt.Sprintf("fresh-%s-%d", kind, n)
	deployments, err := c.kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + fresh})
	if err != nil {
		return run, err
	}
	defer deployments.Stop()

	m, err := startBinaryManager(ctx, l, fmt.Sprintf("flood-%s-%d", kind, n), append([]string{
		"--leader-elect=false", "--controllers=" + appcontroller.ControllerName, "--controller-queue=" + string(kind),
	}, cfg.managerArgs...)...)
	if err != nil {
		return run, err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()

	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, err := m.Exited(); exited {
			return false, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		run.queued = appQueueDepth(ctx, m)
		return run.queued >= n/2, nil
	})
	if err != nil {
		return run, fmt.Errorf("waiting for the pass over %d Apps to be queued: %w", n, err)
	}
	created := time.Now()
	if _, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, floodApp(fresh), metav1.CreateOptions{}); err != nil {
		return run, err
	}
	timeout := time.After(5 * time.Minute)
	for run.firstReconcile == 0 {
		select {
		case ev, ok := <-deployments.ResultChan():
			if !ok {
				return run, fmt.Errorf("the watch on Deployment %s/%s closed", ns, fresh)
			}
			if ev.Type == watch.Added {
				run.firstReconcile = time.Since(created)
			}
		case <-timeout:
			return run, fmt.Errorf("no Deployment for the fresh App %s within 5 minutes", fresh)
		case <-ctx.Done():
			return run, ctx.Err()
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 25*time.Millisecond, cfg.phaseTimeout, true, func(ctx context.Context) (bool, error) {
		return appQueueDepth(ctx, m) == 0, nil
	})
	if err != nil {
		return run, fmt.Errorf("waiting for the pass to drain: %w", err)
	}
	run.drained = time.Since(created)
	// The next run creates its own fresh App; this one and its Deployment go.
	return run, c.crd.AppV1beta1().Apps(ns).Delete(ctx, fresh, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
}

// appQueueDepth is the App controller's queue depth, -1 when unknown.
func appQueueDepth(ctx context.Context, m manager) int {
	d, err := getDebug(ctx, m.Base())
	if err != nil {
		return -1
	}
	for _, cs := range d.Controllers {
		if cs.Name == appcontroller.ControllerName && cs.QueueDepth != nil {
			return *cs.QueueDepth
		}
	}
	return -1
}

// floodRows are scenario 9's rows, one per size, and the target's verdicts.
func floodRows(f *floodResult) ([]row, []verdict) {
	var rows []row
	var verdicts []verdict
	for _, s := range f.sizes {
		fifo, prio := s.runs[controller.FIFOQueue], s.runs[controller.PriorityQueue]
		var parts []string
		for _, kind := range floodQueues {
			r := s.runs[kind]
			parts = append(parts, fmt.Sprintf("%s: %d Apps queued at the create, the pass drained %s after it", kind, r.queued, secs(r.drained)))
		}
		rows = append(rows, row{
			number: "9", scenario: "Fresh change under a flood: one App created while the pass over the others is queued",
			size:    fmt.Sprintf("%d converged Apps (a Deployment of 0 pods each), App controller only", s.apps),
			raw:     fmt.Sprintf("fifo queue: first reconcile after %s", secs(fifo.firstReconcile)),
			manager: fmt.Sprintf("priority queue: first reconcile after %s", secs(prio.firstReconcile)),
			ratio:   fmt.Sprintf("target < %s with the priority queue: %s", secs(floodTarget), check(prio.firstReconcile < floodTarget)),
			writes:  "—",
			where:   strings.Join(parts, "; ") + "; first reconcile = create to the fresh App's Deployment arriving on a watch",
		})
		verdicts = append(verdicts, verdict{fmt.Sprintf("Fresh change under a flood of %d keys < 1 s with the priority queue", s.apps),
			prio.firstReconcile < floodTarget, secs(prio.firstReconcile)})
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
