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
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/controller"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
)

// tracker records when each of want objects first converged (children
// exist, status written) and first turned Ready (pods available).
type tracker struct {
	want int

	mu                   sync.Mutex
	converged, ready     map[string]time.Time
	allConverged, allRdy chan struct{}
}

func newTracker(want int) *tracker {
	return &tracker{want: want, converged: map[string]time.Time{}, ready: map[string]time.Time{},
		allConverged: make(chan struct{}), allRdy: make(chan struct{})}
}

func (t *tracker) observe(name string, converged, ready bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	mark := func(m map[string]time.Time, done chan struct{}) {
		if _, seen := m[name]; !seen {
			m[name] = now
			if len(m) == t.want {
				close(done)
			}
		}
	}
	if converged || ready {
		mark(t.converged, t.allConverged)
	}
	if ready {
		mark(t.ready, t.allRdy)
	}
}

func (t *tracker) counts() (converged, ready int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.converged), len(t.ready)
}

// waitFor waits for done, for at most timeout.
func waitFor(ctx context.Context, done <-chan struct{}, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return context.DeadlineExceeded
	case <-ctx.Done():
		return ctx.Err()
	}
}

// convergence is one manager measurement.
type convergence struct {
	n      int
	before phaseStart
	// elapsed is from the first create to the last object converged.
	elapsed time.Duration
	// readyElapsed is from the first create to the last object Ready (its
	// pods available); zero when the scenario has no pods or they were not
	// all Ready within --settle-timeout (readyMissing says how many).
	readyElapsed time.Duration
	readyMissing int
	// Manager figures: at convergence, and in total once everything settled.
	writesAtConvergence, writes, failedWrites, reconciles float64
	// methods splits writes by HTTP method; putsAtConvergence are the PUTs
	// (status and child updates) made by convergence.
	methods           map[string]float64
	putsAtConvergence float64
	// eventCreates and eventPatches are the manager's Event writes;
	// eventsAtConvergence those counted when the last object converged.
	eventCreates, eventPatches int
	eventsAtConvergence        int
	// getsAtConvergence and gets are the live GETs (cluster.liveGets) until
	// convergence and until everything settled.
	getsAtConvergence, gets float64
	// apiserverCPU is the API server's CPU seconds until convergence.
	apiserverCPU float64
	// peakRSS is the manager's RSS high-water mark at convergence.
	peakRSS float64
	// apiCPU is the API server's CPU profile over the phase, from the
	// first create (profileAPIServer), nil without one.
	apiCPU *cpuBreakdown
	// settled is whether the totals were counted once everything settled
	// (otherwise they stop at convergence).
	settled    bool
	managerCPU float64 // CPU seconds until convergence
	etcdWrites int64   // cluster writes until convergence
	cpu        cpuUsage
	notes      []string
}

func (c convergence) rate() float64 { return float64(c.n) / c.elapsed.Seconds() }

// objectWrites are the manager's writes per object without its events.
func (c convergence) objectWrites() float64 {
	return (c.writes - float64(c.eventCreates+c.eventPatches)) / float64(c.n)
}

// split divides the object writes per object into creates (POST), updates
// (PUT) and the rest (PATCH, DELETE), Events taken out.
func (c convergence) split() (creates, updates, other float64) {
	n := float64(c.n)
	return (c.methods["POST"] - float64(c.eventCreates)) / n, c.methods["PUT"] / n,
		(c.methods["PATCH"] - float64(c.eventPatches) + c.methods["DELETE"]) / n
}

// measureConvergence creates n objects with create, concurrency at a time,
// and waits until t says they all converged; then until they are all Ready
// (when ready is set), the manager is idle and the cluster quiet.
func measureConvergence(ctx context.Context, c *cluster, cfg config, name string, m manager, t *tracker, waitReady bool,
	settleAfter bool, events func(context.Context) (creates, patches int, err error), create func(ctx context.Context, i int) error) (res convergence, err error) {
	logger := klog.FromContext(ctx)
	before, err := settle(ctx, c, cfg)
	if err != nil {
		return convergence{}, err
	}
	res = convergence{n: t.want, before: before}
	c0, err := m.Counters(ctx)
	if err != nil {
		return res, err
	}
	rev0, err := c.revision(ctx)
	if err != nil {
		return res, err
	}
	gets0, err := c.liveGets(ctx)
	if err != nil {
		return res, err
	}
	stopProfile, err := startProfile(cfg, name)
	if err != nil {
		return res, err
	}
	defer stopProfile()
	cpu0 := takeCPUSnapshot()
	if p, ok := m.(creationWatcher); ok {
		p.creating()
	}
	// Stopped at convergence, waited for last: its last window must not
	// delay the counters read at convergence.
	apiProfile := profileAPIServer(ctx, c, cfg, name, name)
	defer func() {
		if apiCPU, perr := apiProfile.finish(ctx); err == nil {
			res.apiCPU, err = apiCPU, perr
		}
	}()
	start := time.Now()
	if err := parallel(ctx, t.want, cfg.concurrency, create); err != nil {
		return res, fmt.Errorf("creating: %w", err)
	}
	logger.Info("Created; waiting for convergence", "objects", t.want, "after", time.Since(start).Round(time.Millisecond))
	if err := waitFor(ctx, t.allConverged, cfg.phaseTimeout); err != nil {
		n, _ := t.counts()
		return res, fmt.Errorf("%d of %d converged within %s: %w", n, t.want, cfg.phaseTimeout, err)
	}
	res.elapsed = time.Since(start)
	stopProfile()
	apiProfile.stopOnce()
	cpu1 := takeCPUSnapshot()
	res.cpu = cpu0.until(cpu1)
	// Events before the manager's counters: an Event written in between
	// counts as an object write, never the other way round.
	if events != nil {
		creates, patches, err := events(ctx)
		if err != nil {
			return res, err
		}
		res.eventsAtConvergence = creates + patches
	}
	c1, err := m.Counters(ctx)
	if err != nil {
		return res, err
	}
	rev1, err := c.revision(ctx)
	if err != nil {
		return res, err
	}
	gets1, err := c.liveGets(ctx)
	if err != nil {
		return res, err
	}
	res.getsAtConvergence = gets1 - gets0
	res.apiserverCPU = res.cpu.Cores["kube-apiserver"] * res.cpu.Wall.Seconds()
	res.writesAtConvergence = c1.Writes - c0.Writes
	res.putsAtConvergence = c1.WritesByMethod["PUT"] - c0.WritesByMethod["PUT"]
	res.managerCPU = c1.CPUSeconds - c0.CPUSeconds
	res.etcdWrites = rev1 - rev0
	if hwm, err := procStatusKB(m.PID(), "VmHWM"); err == nil {
		res.peakRSS = hwm
	}
	logger.Info("Converged", "objects", t.want, "elapsed", res.elapsed.Round(time.Millisecond),
		"perSecond", fmt.Sprintf("%.1f", res.rate()), "cpu", res.cpu.String(),
		"writesPerObject", fmt.Sprintf("%.2f", res.writesAtConvergence/float64(t.want)),
		"getsPerObject", fmt.Sprintf("%.2f", res.getsAtConvergence/float64(t.want)))
	if !settleAfter {
		res.writes, res.gets = res.writesAtConvergence, res.getsAtConvergence
		res.failedWrites = c1.FailedWrites - c0.FailedWrites
		res.reconciles = c1.Reconciles - c0.Reconciles
		res.methods = map[string]float64{}
		for method, n := range c1.WritesByMethod {
			res.methods[method] = n - c0.WritesByMethod[method]
		}
		return res, nil
	}
	res.settled = true

	if waitReady {
		err := waitFor(ctx, t.allRdy, cfg.settleTimeout)
		_, ready := t.counts()
		switch {
		case ctx.Err() != nil:
			return res, ctx.Err()
		case err != nil:
			res.readyMissing = t.want - ready
			logger.Info("Not all Ready within --settle-timeout; going on", "ready", ready, "of", t.want)
		default:
			res.readyElapsed = time.Since(start)
			logger.Info("All Ready", "elapsed", res.readyElapsed.Round(time.Second))
		}
	}
	if err := waitManagerReady(ctx, m, cfg.settleTimeout, 3*time.Second); err != nil {
		return res, err
	}
	if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
		return res, err
	}
	// Anything the quiet cluster's last changes asked the manager to write.
	if err := waitManagerReady(ctx, m, cfg.settleTimeout, 3*time.Second); err != nil {
		return res, err
	}
	c2, err := m.Counters(ctx)
	if err != nil {
		return res, err
	}
	res.writes = c2.Writes - c0.Writes
	res.methods = map[string]float64{}
	for method, n := range c2.WritesByMethod {
		res.methods[method] = n - c0.WritesByMethod[method]
	}
	gets2, err := c.liveGets(ctx)
	if err != nil {
		return res, err
	}
	res.gets = gets2 - gets0
	res.failedWrites = c2.FailedWrites - c0.FailedWrites
	res.reconciles = c2.Reconciles - c0.Reconciles
	return res, nil
}

// profilePath is where profile mode writes the CPU profile of a scenario:
// --cpuprofile with the scenario's name before the extension.
func profilePath(cfg config, scenario string) string {
	ext := filepath.Ext(cfg.cpuprofile)
	return strings.TrimSuffix(cfg.cpuprofile, ext) + "-" + scenario + ext
}

// startProfile starts the CPU profile of a scenario in profile mode; the
// returned function stops it and may be called more than once.
func startProfile(cfg config, scenario string) (func(), error) {
	if cfg.cpuprofile == "" {
		return func() {}, nil
	}
	f, err := os.Create(profilePath(cfg, scenario))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}, nil
}

// conditionStatus returns the condition of type t, or nil.
func condition(conds []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conds, t)
}

// appConverged: the status was written for the current generation by a
// reconcile that found every child and wrote without failure.
func appConverged(a *appv1.App) (converged, ready bool) {
	if a.Status.ObservedGeneration != a.Generation {
		return false, false
	}
	degraded := condition(a.Status.Conditions, appv1.ConditionDegraded)
	readyCond := condition(a.Status.Conditions, appv1.ConditionReady)
	if degraded == nil || degraded.Status != metav1.ConditionFalse || readyCond == nil {
		return false, false
	}
	return readyCond.Reason != appv1.ReasonResourceMissing, readyCond.Status == metav1.ConditionTrue
}

// pipelineConverged: the status was written for the current generation by a
// reconcile that found the storage and every step's children.
func pipelineConverged(p *pipelinev1.Pipeline) (converged, ready bool) {
	if p.Status.ObservedGeneration != p.Generation || len(p.Status.Steps) != len(p.Spec.Steps) {
		return false, false
	}
	degraded := condition(p.Status.Conditions, pipelinev1.ConditionDegraded)
	if degraded == nil || degraded.Status != metav1.ConditionFalse {
		return false, false
	}
	for _, t := range []string{pipelinev1.ConditionStorageReady, pipelinev1.ConditionStepsReady} {
		cond := condition(p.Status.Conditions, t)
		if cond == nil || strings.Contains(cond.Message, "does not exist") {
			return false, false
		}
	}
	readyCond := condition(p.Status.Conditions, pipelinev1.ConditionReady)
	return true, readyCond != nil && readyCond.Status == metav1.ConditionTrue
}

// watchApps feeds t from the Apps of namespace until ctx ends.
func watchApps(ctx context.Context, c *cluster, ns string, t *tracker) {
	factory := crdinformers.NewSharedInformerFactoryWithOptions(c.crd, 0, crdinformers.WithNamespace(ns))
	feed(ctx, factory, factory.App().V1().Apps().Informer(), func(a *appv1.App) {
		conv, ready := appConverged(a)
		t.observe(a.Name, conv, ready)
	})
}

// watchPipelines feeds t from the Pipelines labelled with phase.
func watchPipelines(ctx context.Context, c *cluster, phase string, t *tracker) {
	factory := crdinformers.NewSharedInformerFactoryWithOptions(c.crd, 0,
		crdinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchLabel + "=" + phase }))
	feed(ctx, factory, factory.Pipeline().V1().Pipelines().Informer(), func(p *pipelinev1.Pipeline) {
		conv, ready := pipelineConverged(p)
		t.observe(p.Name, conv, ready)
	})
}

// watchIngresses feeds t from the Ingresses of namespace: one that exists
// has converged (it has no status to wait for).
func watchIngresses(ctx context.Context, c *cluster, ns string, t *tracker) {
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0, kubeinformers.WithNamespace(ns))
	feed(ctx, factory, factory.Networking().V1().Ingresses().Informer(), func(ing *networkingv1.Ingress) {
		t.observe(ing.Name, true, true)
	})
}

// informerFactory is what feed needs of a generated informer factory.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// feed passes every T that informer adds or updates to observe, from
// factory started now until ctx ends, and returns once the cache is synced.
func feed[T any](ctx context.Context, factory informerFactory, informer cache.SharedIndexInformer, observe func(T)) {
	handle := func(obj any) {
		if o, ok := obj.(T); ok {
			observe(o)
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, UpdateFunc: func(_, obj any) { handle(obj) },
	})
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	go func() { <-ctx.Done(); factory.Shutdown() }()
}

// managedCount counts the objects in ns carrying the manager's label.
func managedCount(ctx context.Context, c *cluster, ns string) (deployments, services, ingresses, claims int, err error) {
	opts := metav1.ListOptions{LabelSelector: controller.ManagedByLabel + "=" + controller.ManagedByValue}
	d, err := c.kube.AppsV1().Deployments(ns).List(ctx, opts)
	if err != nil {
		return
	}
	s, err := c.kube.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		return
	}
	i, err := c.kube.NetworkingV1().Ingresses(ns).List(ctx, opts)
	if err != nil {
		return
	}
	p, err := c.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	if err != nil {
		return
	}
	return len(d.Items), len(s.Items), len(i.Items), len(p.Items), nil
}

// createAndMeasure creates namespace ns, starts watch feeding a tracker of n
// parents, and measures the convergence of the n parents create makes.
func createAndMeasure(ctx context.Context, c *cluster, cfg config, name string, m manager, ns string, n int,
	watch func(context.Context, *tracker), waitReady bool, events func(context.Context) (int, int, error), create func(context.Context, int) error) (convergence, error) {
	return createAndMeasureUntil(ctx, c, cfg, name, m, ns, n, watch, waitReady, true, events, create)
}

// createAndMeasureToConvergence is createAndMeasure with every figure taken
// when the last object converged: nothing waits for pods or a quiet cluster.
func createAndMeasureToConvergence(ctx context.Context, c *cluster, cfg config, name string, m manager, ns string, n int,
	watch func(context.Context, *tracker), _ bool, events func(context.Context) (int, int, error), create func(context.Context, int) error) (convergence, error) {
	return createAndMeasureUntil(ctx, c, cfg, name, m, ns, n, watch, false, false, events, create)
}

func createAndMeasureUntil(ctx context.Context, c *cluster, cfg config, name string, m manager, ns string, n int,
	watch func(context.Context, *tracker), waitReady, settleAfter bool, events func(context.Context) (int, int, error), create func(context.Context, int) error) (convergence, error) {
	if err := c.createNamespace(ctx, ns); err != nil {
		return convergence{}, err
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	t := newTracker(n)
	watch(watchCtx, t)
	return measureConvergence(ctx, c, cfg, name, m, t, waitReady, settleAfter, events, create)
}

// scenarioApps: cfg.apps Apps with Service and Ingress, created at once.
func scenarioApps(ctx context.Context, c *cluster, cfg config, m manager) (convergence, error) {
	return convergeApps(ctx, c, cfg, m, scenarioNameApps, "bench-apps", nil, cfg.apps, true)
}

// convergeApps measures the convergence of n Apps with Service and Ingress
// created at once in ns, carrying labels; waitReady waits for their pods
// and the settled totals, otherwise the figures stop at convergence.
func convergeApps(ctx context.Context, c *cluster, cfg config, m manager, name, ns string, appLabels map[string]string, n int, waitReady bool) (convergence, error) {
	watch := func(ctx context.Context, t *tracker) { watchApps(ctx, c, ns, t) }
	events := func(ctx context.Context) (int, int, error) { return c.eventWrites(ctx, ns, "app", "") }
	measure := createAndMeasure
	if !waitReady {
		measure = createAndMeasureToConvergence
	}
	res, err := measure(ctx, c, cfg, name, m, ns, n, watch, waitReady, events, func(ctx context.Context, i int) error {
		app := newApp(i, 1)
		app.Labels = appLabels
		_, err := c.crd.AppV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("Apps: %w", err)
	}
	d, s, i, _, err := managedCount(ctx, c, ns)
	if err != nil {
		return res, err
	}
	if d != n || s != n || i != n {
		return res, fmt.Errorf("%d Deployments, %d Services, %d Ingresses for %d converged Apps", d, s, i, n)
	}
	if res.eventCreates, res.eventPatches, err = events(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// scenarioPipelines: cfg.pipelines Pipelines of cfg.steps steps pinned to
// the kwok nodes, created at once.
func scenarioPipelines(ctx context.Context, c *cluster, cfg config, m manager) (convergence, error) {
	return convergePipelines(ctx, c, cfg, m, scenarioNamePipelines, "mgr", cfg.pipelines, true)
}

// convergePipelines measures n Pipelines labelled with phase.
func convergePipelines(ctx context.Context, c *cluster, cfg config, m manager, name, phase string, n int, waitReady bool) (convergence, error) {
	// The controller's default namespace for children (--pipeline-namespace),
	// which --pipeline-allowed-namespaces always allows.
	ns := pipeline.DefaultOptions().DefaultNamespace
	watch := func(ctx context.Context, t *tracker) { watchPipelines(ctx, c, phase, t) }
	// Events about a cluster-scoped Pipeline go to the default namespace.
	events := func(ctx context.Context) (creates, patches int, err error) {
		for _, eventNS := range []string{ns, metav1.NamespaceDefault} {
			c, p, err := c.eventWrites(ctx, eventNS, pipeline.ControllerName, phase+"-pl-")
			if err != nil {
				return 0, 0, err
			}
			creates, patches = creates+c, patches+p
		}
		return creates, patches, nil
	}
	before, _, _, beforeClaims, err := managedCount(ctx, c, ns)
	if err != nil {
		return convergence{}, err
	}
	measure := createAndMeasure
	if !waitReady {
		measure = createAndMeasureToConvergence
	}
	res, err := measure(ctx, c, cfg, name, m, ns, n, watch, waitReady, events, func(ctx context.Context, i int) error {
		_, err := c.crd.PipelineV1().Pipelines().Create(ctx, newPipeline(phase, i, cfg.steps, ns, c.nodes), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("Pipelines: %w", err)
	}
	d, _, _, claims, err := managedCount(ctx, c, ns)
	if err != nil {
		return res, err
	}
	if want := n * cfg.steps; d-before != want || claims-beforeClaims != n {
		return res, fmt.Errorf("%d Deployments, %d claims for %d converged Pipelines of %d steps", d-before, claims-beforeClaims, n, cfg.steps)
	}
	if res.eventCreates, res.eventPatches, err = events(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// scenarioIngress: cfg.services annotated headless Services, created at once.
func scenarioIngress(ctx context.Context, c *cluster, cfg config, m manager) (convergence, error) {
	return convergeIngress(ctx, c, cfg, m, scenarioNameIngress, "bench-ingress", cfg.services)
}

// convergeIngress measures n annotated headless Services created in ns.
func convergeIngress(ctx context.Context, c *cluster, cfg config, m manager, name, ns string, n int) (convergence, error) {
	watch := func(ctx context.Context, t *tracker) { watchIngresses(ctx, c, ns, t) }
	events := func(ctx context.Context) (int, int, error) { return c.eventWrites(ctx, ns, "ingress", "") }
	res, err := createAndMeasure(ctx, c, cfg, name, m, ns, n, watch, false, events, func(ctx context.Context, i int) error {
		_, err := c.kube.CoreV1().Services(ns).Create(ctx, newIngressService(i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("Ingresses: %w", err)
	}
	if res.eventCreates, res.eventPatches, err = events(ctx); err != nil {
		return res, err
	}
	return res, nil
}
