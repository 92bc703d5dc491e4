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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

// memorySampler follows a manager's heap and RSS once a second.
type memorySampler struct {
	m                manager
	mu               sync.Mutex
	maxHeap, maxRSS  float64
	lastHeap, lastRS float64
	stop             context.CancelFunc
	done             chan struct{}
}

func startMemorySampler(ctx context.Context, m manager) *memorySampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &memorySampler{m: m, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			s.sample(ctx)
			return false, nil
		})
	}()
	return s
}

func (s *memorySampler) sample(ctx context.Context) {
	c, err := s.m.Counters(ctx)
	if err != nil {
		return
	}
	rss := c.RSS
	if v, err := procStatusKB(s.m.PID(), "VmRSS"); err == nil {
		rss = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastHeap, s.lastRS = c.HeapInuse, rss
	s.maxHeap, s.maxRSS = max(s.maxHeap, c.HeapInuse), max(s.maxRSS, rss)
}

// read samples once more and returns the current and peak figures. The
// peak RSS is the kernel's high-water mark when it is known.
func (s *memorySampler) read(ctx context.Context) (heap, rss, peakHeap, peakRSS float64) {
	s.sample(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	peakRSS = s.maxRSS
	if hwm, err := procStatusKB(s.m.PID(), "VmHWM"); err == nil {
		peakRSS = hwm
	}
	return s.lastHeap, s.lastRS, s.maxHeap, peakRSS
}

func (s *memorySampler) close() {
	s.stop()
	<-s.done
}

// memoryResult is scenario 5: the manager's memory after scenarios 1-3.
type memoryResult struct {
	baseObjects, objects         int
	baseManaged, managed         int
	byKind                       map[string]int
	baseHeap, baseRSS            float64
	heap, rss, peakHeap, peakRSS float64
}

// perThousandManaged is bytes per 1,000 managed objects above the baseline.
func (r memoryResult) perThousandManaged(now, base float64) float64 {
	if r.managed <= r.baseManaged {
		return 0
	}
	return (now - base) / float64(r.managed-r.baseManaged) * 1000
}

// perThousand is bytes per 1,000 cached objects above the baseline.
func (r memoryResult) perThousand(now, base float64) float64 {
	if r.objects <= r.baseObjects {
		return 0
	}
	return (now - base) / float64(r.objects-r.baseObjects) * 1000
}

// steadyResult is scenario 4.
type steadyResult struct {
	resync, duration     time.Duration
	startup              time.Duration // start to ready, synced, idle
	startupWrites        float64
	objects              int
	writes, failedWrites float64
	reconciles           float64
	cpuSeconds           float64
	rss, heap            float64
	before               phaseStart
}

// scenarioSteady runs a fresh manager with a short resync period over
// everything in the cluster and counts what it writes and the CPU it uses
// over cfg.steadyDuration once it is idle.
func scenarioSteady(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (steadyResult, error) {
	logger := klog.FromContext(ctx)
	res := steadyResult{resync: cfg.resync, duration: cfg.steadyDuration}
	var err error
	if res.objects, _, err = c.cachedObjects(ctx); err != nil {
		return res, err
	}
	begin := time.Now()
	m, err := startBinaryManager(ctx, l, "steady",
		append([]string{"--leader-elect=false", "--min-resync-period=" + cfg.resync.String()}, cfg.managerArgs...)...)
	if err != nil {
		return res, err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	if err := waitManagerReady(ctx, m, 10*time.Minute, 3*time.Second); err != nil {
		return res, err
	}
	res.startup = time.Since(begin)
	c0, err := m.Counters(ctx)
	if err != nil {
		return res, err
	}
	res.startupWrites = c0.Writes
	if res.before, err = settle(ctx, c, cfg); err != nil {
		return res, err
	}
	c0, err = m.Counters(ctx)
	if err != nil {
		return res, err
	}
	cpu0, cpuErr := procTimes(m.PID())
	logger.Info("Steady state: measuring", "duration", cfg.steadyDuration, "resync", cfg.resync, "objects", res.objects)
	timer := time.NewTimer(cfg.steadyDuration)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-timer.C:
	}
	c1, err := m.Counters(ctx)
	if err != nil {
		return res, err
	}
	res.writes = c1.Writes - c0.Writes
	res.failedWrites = c1.FailedWrites - c0.FailedWrites
	res.reconciles = c1.Reconciles - c0.Reconciles
	res.cpuSeconds = c1.CPUSeconds - c0.CPUSeconds
	if cpu1, err := procTimes(m.PID()); err == nil && cpuErr == nil {
		res.cpuSeconds = (cpu1 - cpu0).Seconds()
	}
	res.heap = c1.HeapInuse
	res.rss = c1.RSS
	if rss, err := procStatusKB(m.PID(), "VmRSS"); err == nil {
		res.rss = rss
	}
	logger.Info("Steady state measured", "writes", res.writes, "reconciles", res.reconciles, "cpuSeconds", res.cpuSeconds)
	return res, nil
}

// failoverResult is scenario 6: one run per cache size and standby mode.
type failoverResult struct {
	lease, renew, retry time.Duration
	runs                []failoverRun
}

// failoverRun is one size and standby mode: kill -9 of the leader, then
// SIGTERM of the next one. Each takeover is split in two at the Lease's
// acquireTime: kill → Lease acquired (the election: lease duration or one
// retry period, the same for every mode) and Lease acquired → the new
// leader's first reconcile (what the standby mode changes).
type failoverRun struct {
	standby string
	objects int
	// standbyRSS and standbyHeap are the standby's, measured before the kill;
	// leaderRSS is the leader's just before the standby started.
	standbyRSS, standbyHeap, leaderRSS float64

	killAcquired, killReconcile time.Duration
	termAcquired, termReconcile time.Duration
	// termExit is the SIGTERM'd leader's exit code, termExitAfter how long
	// it took to exit.
	termExit      int
	termExitAfter time.Duration
}

// fillNamespace holds the annotated headless Services (and the Ingresses the
// manager makes for them) that bring the cache to each --failover-sizes.
const fillNamespace = "bench-failover-fill"

// scenarioFailover measures, at each cache size and for each standby mode,
// a kill -9 and a SIGTERM failover between managers with leader election.
func scenarioFailover(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (failoverResult, error) {
	res := failoverResult{lease: cfg.leaseDuration, renew: cfg.renewDeadline, retry: cfg.retryPeriod}
	const ns = "bench-failover"
	for _, name := range []string{ns, fillNamespace} {
		if err := c.createNamespace(ctx, name); err != nil {
			return res, err
		}
	}
	// Something to reconcile even when no other scenario ran.
	if err := parallel(ctx, cfg.failoverApps, cfg.concurrency, func(ctx context.Context, i int) error {
		_, err := c.crd.AppV1().Apps(ns).Create(ctx, newApp(i, 1), metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return res, fmt.Errorf("creating the failover Apps: %w", err)
	}
	sizes := cfg.failoverSizes
	if len(sizes) == 0 {
		sizes = []int{0}
	}
	filled := 0
	for _, size := range sizes {
		objects, _, err := c.cachedObjects(ctx)
		if err != nil {
			return res, err
		}
		if size > objects {
			// Each Service brings its Ingress, made by the first leader.
			more := (size - objects + 1) / 2
			if err := parallel(ctx, more, 16, func(ctx context.Context, i int) error {
				_, err := c.kube.CoreV1().Services(fillNamespace).Create(ctx, fillService(filled+i), metav1.CreateOptions{})
				return ignoreExists(err)
			}); err != nil {
				return res, fmt.Errorf("filling the cache to %d objects: %w", size, err)
			}
			filled += more
		}
		for _, mode := range cfg.failoverStandby {
			run, err := failoverOnce(ctx, c, cfg, l, ns, mode, size)
			if err != nil {
				return res, fmt.Errorf("%s standby at %d objects: %w", mode, size, err)
			}
			res.runs = append(res.runs, run)
		}
	}
	return res, nil
}

func fillService(i int) *corev1.Service {
	return &corev1.Service{
		// With its own host: the manager's flags set no default domain for
		// Services, and an Ingress without a host is refused.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fill-%d", i), Annotations: map[string]string{
			"ingress/http": "true", "ingress/host": fmt.Sprintf("fill-%d.bench.example.com", i)}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
	}
}

// failoverOnce runs three managers with standby mode on a fresh Lease:
// kill -9 of the first leader, then SIGTERM of the second, once the cache
// holds size objects (the first leader makes the fill's Ingresses).
func failoverOnce(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, ns, mode string, size int) (failoverRun, error) {
	logger := klog.FromContext(ctx).WithValues("standby", mode)
	run := failoverRun{standby: mode}
	leaseName := fmt.Sprintf("bench-scale-%d-%d", os.Getpid(), time.Now().UnixNano())
	start := func(name string) (*binaryManager, error) {
		return startBinaryManager(ctx, l, name+"-"+mode, append([]string{
			"--leader-elect=true",
			"--standby=" + mode,
			"--leader-elect-resource-namespace=" + ns,
			"--leader-elect-resource-name=" + leaseName,
			"--leader-elect-lease-duration=" + cfg.leaseDuration.String(),
			"--leader-elect-renew-deadline=" + cfg.renewDeadline.String(),
			"--leader-elect-retry-period=" + cfg.retryPeriod.String(),
		}, cfg.managerArgs...)...)
	}
	first, err := start("failover-1")
	if err != nil {
		return run, err
	}
	defer func() { _, _ = first.Terminate(time.Minute) }()
	if err := waitLeading(ctx, first, cfg.leaseDuration+2*time.Minute); err != nil {
		return run, err
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		run.objects, _, err = c.cachedObjects(ctx)
		return err == nil && run.objects >= size, err
	}); err != nil {
		return run, fmt.Errorf("the cache holds %d objects, not the %d asked for: %w", run.objects, size, err)
	}
	if err := waitManagerReady(ctx, first, 10*time.Minute, 2*time.Second); err != nil {
		return run, err
	}
	if rss, err := procStatusKB(first.PID(), "VmRSS"); err == nil {
		run.leaderRSS = rss
	}

	second, err := start("failover-2")
	if err != nil {
		return run, err
	}
	defer func() { _, _ = second.Terminate(time.Minute) }()
	if err := waitStandby(ctx, c, second, ns, leaseName, cfg); err != nil {
		return run, err
	}
	if sc, err := second.Counters(ctx); err == nil {
		run.standbyHeap = sc.HeapInuse
		run.standbyRSS = sc.RSS
	}
	if rss, err := procStatusKB(second.PID(), "VmRSS"); err == nil {
		run.standbyRSS = rss
	}
	logger.Info("Failover: kill -9 of the leader", "objects", run.objects, "standbyRSS", run.standbyRSS)
	killed := time.Now()
	first.Kill()
	if run.killAcquired, run.killReconcile, err = timeTakeover(ctx, c, second, ns, leaseName, killed, cfg.leaseDuration+2*time.Minute); err != nil {
		return run, fmt.Errorf("after kill -9: %w", err)
	}
	logger.Info("Standby took over after kill -9", "acquired", run.killAcquired, "firstReconcile", run.killReconcile)
	if err := waitManagerReady(ctx, second, 10*time.Minute, 2*time.Second); err != nil {
		return run, err
	}

	third, err := start("failover-3")
	if err != nil {
		return run, err
	}
	defer func() { _, _ = third.Terminate(time.Minute) }()
	if err := waitStandby(ctx, c, third, ns, leaseName, cfg); err != nil {
		return run, err
	}
	logger.Info("Failover: SIGTERM of the leader")
	exited := make(chan struct{})
	termed := time.Now()
	go func() {
		defer close(exited)
		code, err := second.Terminate(2 * time.Minute)
		run.termExit, run.termExitAfter = code, time.Since(termed)
		if err != nil {
			logger.Error(err, "The SIGTERM'd leader did not exit")
		}
	}()
	acquired, reconcile, err := timeTakeover(ctx, c, third, ns, leaseName, termed, cfg.leaseDuration+2*time.Minute)
	<-exited
	if err != nil {
		return run, fmt.Errorf("after SIGTERM: %w", err)
	}
	run.termAcquired, run.termReconcile = acquired, reconcile
	logger.Info("Standby took over after SIGTERM", "acquired", acquired, "firstReconcile", reconcile, "oldLeaderExit", run.termExit)
	return run, nil
}

func waitLeading(ctx context.Context, m manager, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := m.Exited(); exited {
			return false, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		d, err := getDebug(ctx, m.Base())
		return err == nil && d.Leading, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for manager %s to lead: %w", m.Name(), err)
	}
	return nil
}

// waitStandby waits until m serves as a standby and has seen the leader
// renew its Lease twice since it started, as a standby in production has.
func waitStandby(ctx context.Context, c *cluster, m manager, ns, lease string, cfg config) error {
	started := metav1.NowMicro()
	if err := waitManagerReady(ctx, m, time.Minute, 0); err != nil {
		return err
	}
	renewals := 0
	var last *metav1.MicroTime
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 4*cfg.leaseDuration+time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.kube.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		renew := leaseRenewTime(l)
		if renew != nil && renew.After(started.Time) && (last == nil || !renew.Equal(last)) {
			renewals++
			last = renew
		}
		return renewals >= 2, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the leader to renew its Lease while %s stands by: %w", m.Name(), err)
	}
	if d, err := getDebug(ctx, m.Base()); err != nil || d.Leading {
		return fmt.Errorf("manager %s should be a standby (leading %v, %v)", m.Name(), d.Leading, err)
	}
	return nil
}

func leaseRenewTime(l *coordinationv1.Lease) *metav1.MicroTime { return l.Spec.RenewTime }

// timeTakeover waits until the standby has reconciled something, then
// times the takeover by the standby's own clock: since → the acquireTime it
// wrote in the Lease, and that → the first "First reconcile" its log states
// (pkg/controller). Its metrics only say that it has reconciled: polling
// them for the time would add the poll period and a scrape of every cached
// object's metrics to the figure. since is this machine's clock, the same.
func timeTakeover(ctx context.Context, c *cluster, m *binaryManager, ns, lease string, since time.Time, timeout time.Duration) (acquired, firstReconcile time.Duration, err error) {
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := m.Exited(); exited {
			return false, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		counters, err := m.Counters(ctx)
		return err == nil && counters.Reconciles > 0, nil
	})
	if err != nil {
		return 0, 0, err
	}
	l, err := c.kube.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	if l.Spec.AcquireTime == nil {
		return 0, 0, fmt.Errorf("lease %s/%s has no acquireTime", ns, lease)
	}
	at := l.Spec.AcquireTime.Time
	// The log is written before the metrics count the reconcile.
	firsts, err := firstReconciles(m.LogPath(), at)
	if err != nil {
		return 0, 0, err
	}
	var first time.Time
	for _, t := range firsts {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if first.IsZero() {
		return 0, 0, fmt.Errorf("manager %s reconciled, but its log states no first reconcile after it acquired the Lease at %s", m.Name(), at.Format(time.RFC3339Nano))
	}
	return at.Sub(since), first.Sub(at), nil
}
