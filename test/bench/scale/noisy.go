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
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

// scenarioNameNoisy: the manager's memory with and without objects it does
// not manage in the cluster (issue 26).
const scenarioNameNoisy = "noisy"

const (
	noiseNamespaces   = 10
	noisyQuietTimeout = 30 * time.Second
	// noiseCreators create the noise: fast, not measured.
	noiseCreators = 20
	// noiseScheduler is a scheduler nobody runs: the noise Pods stay Pending
	// (a nodeName of a missing node would be garbage-collected by
	// kube-controller-manager).
	noiseScheduler = "bench-nobody"
)

// noisyRun is one fresh manager converging the same Apps.
type noisyRun struct {
	conv               convergence
	cachedObjects      int
	peakRSS, rss, heap float64
}

// noisyResult is the same App workload without, then with, the noise.
type noisyResult struct {
	apps, noise        int
	noiseCreated       time.Duration
	without, withNoise noisyRun
}

// growth is the RSS growth the noise caused, as a share of the quiet run's
// peak.
func (r noisyResult) growth() float64 {
	if r.without.peakRSS == 0 {
		return 0
	}
	return r.withNoise.peakRSS/r.without.peakRSS - 1
}

// scenarioNoisy converges --noisy-apps Apps with a fresh manager, deletes
// them, creates --noise-objects objects the manager does not manage in
// other namespaces, and converges the same Apps with another fresh manager.
// The noise stays: this scenario runs last.
func scenarioNoisy(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (noisyResult, error) {
	res := noisyResult{apps: cfg.noisyApps, noise: cfg.noiseObjects}
	var err error
	if res.without, err = noisyConvergence(ctx, c, cfg, l, "noisy-without", "bench-noisy-1"); err != nil {
		return res, err
	}
	if err := c.deleteNamespace(ctx, "bench-noisy-1", cfg.cleanupTimeout); err != nil {
		return res, err
	}
	start := time.Now()
	if err := createNoise(ctx, c, cfg.noiseObjects); err != nil {
		return res, fmt.Errorf("creating the noise: %w", err)
	}
	res.noiseCreated = time.Since(start)
	klog.FromContext(ctx).Info("Created the noise", "objects", cfg.noiseObjects, "elapsed", res.noiseCreated.Round(time.Second))
	if res.withNoise, err = noisyConvergence(ctx, c, cfg, l, "noisy-with", "bench-noisy-2"); err != nil {
		return res, err
	}
	return res, nil
}

// noisyConvergence starts a fresh manager, converges the Apps in ns and
// reads its memory once it is idle.
func noisyConvergence(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, name, ns string) (noisyRun, error) {
	var run noisyRun
	// Memory is the figure here, not the rate: do not wait for
	// kube-controller-manager's status writes of the noise Deployments
	// (20 per second, its client limit).
	cfg.quietTimeout = min(cfg.quietTimeout, noisyQuietTimeout)
	m, err := startBinaryManager(ctx, l, name, append([]string{"--leader-elect=false"}, cfg.managerArgs...)...)
	if err != nil {
		return run, err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	if err := waitManagerReady(ctx, m, 10*time.Minute, 3*time.Second); err != nil {
		return run, err
	}
	if run.conv, err = convergeApps(ctx, c, cfg, m, scenarioNameNoisy, ns, nil, cfg.noisyApps, false); err != nil {
		return run, err
	}
	if err := waitManagerReady(ctx, m, cfg.settleTimeout, 3*time.Second); err != nil {
		return run, err
	}
	if run.cachedObjects, _, err = c.cachedObjects(ctx); err != nil {
		return run, err
	}
	if ct, err := m.Counters(ctx); err == nil {
		run.heap, run.rss = ct.HeapInuse, ct.RSS
	}
	if rss, err := procStatusKB(m.PID(), "VmRSS"); err == nil {
		run.rss = rss
	}
	if hwm, err := procStatusKB(m.PID(), "VmHWM"); err == nil {
		run.peakRSS = hwm
	}
	return run, nil
}

// createNoise creates n objects in noiseNamespaces namespaces, a quarter
// each of paused Deployments of 0 replicas (kube-controller-manager makes
// no ReplicaSets nor pods), headless Services without selector (no IP, no EndpointSlices),
// Pods for a scheduler nobody runs, and ConfigMaps.
func createNoise(ctx context.Context, c *cluster, n int) error {
	for i := range noiseNamespaces {
		ns := fmt.Sprintf("bench-noise-%d", i)
		if err := c.createNamespace(ctx, ns); err != nil {
			return err
		}
		// Pods need the namespace's default ServiceAccount, which
		// kube-controller-manager creates.
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		}); err != nil {
			return fmt.Errorf("waiting for the default ServiceAccount of %s: %w", ns, err)
		}
	}
	labels := map[string]string{"app.kubernetes.io/name": "noise"}
	return parallel(ctx, n, noiseCreators, func(ctx context.Context, i int) error {
		ns := fmt.Sprintf("bench-noise-%d", i%noiseNamespaces)
		meta := metav1.ObjectMeta{Name: fmt.Sprintf("noise-%06d", i), Labels: labels}
		var err error
		switch i % 4 {
		case 0:
			// Paused as well: kube-controller-manager makes no ReplicaSet
			// for it either, only one status write.
			_, err = c.kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Paused:   true,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: noisePodSpec()},
			}}, metav1.CreateOptions{})
		case 1:
			_, err = c.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Ports:     []corev1.ServicePort{{Port: 80}},
			}}, metav1.CreateOptions{})
		case 2:
			spec := noisePodSpec()
			spec.SchedulerName = noiseScheduler
			_, err = c.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
		default:
			_, err = c.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta,
				Data: map[string]string{"config.yaml": "replicas: 3\nimage: nginx:1.27\n"}}, metav1.CreateOptions{})
		}
		return ignoreExists(err)
	})
}

func noisePodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{{Name: "app", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}},
	}
}

// noisyRow reports the noisy scenario and its verdict.
func noisyRow(n *noisyResult) (row, verdict) {
	g := n.growth()
	return row{
			number: "11", scenario: "Noisy cluster: the same Apps without, then with, objects the manager does not manage",
			size:    fmt.Sprintf("%d Apps; %d noise objects in %d other namespaces (Deployments of 0 replicas, headless Services, unscheduled Pods, ConfigMaps)", n.apps, n.noise, noiseNamespaces),
			raw:     fmt.Sprintf("without: peak RSS %s (now %s, heap %s), %d cached objects; Apps converged at %.1f/s", mib(n.without.peakRSS), mib(n.without.rss), mib(n.without.heap), n.without.cachedObjects, n.without.conv.rate()),
			manager: fmt.Sprintf("with: peak RSS %s (now %s, heap %s), %d cached objects; Apps converged at %.1f/s", mib(n.withNoise.peakRSS), mib(n.withNoise.rss), mib(n.withNoise.heap), n.withNoise.cachedObjects, n.withNoise.conv.rate()),
			ratio:   fmt.Sprintf("RSS growth %+.0f%% (target ≤ 10%%: %s)", 100*g, check(g <= 0.10)),
			writes:  "—",
			where:   fmt.Sprintf("a fresh manager each time; the first run's Apps deleted before the noise; the noise created in %s, %d at a time", secs(n.noiseCreated), noiseCreators),
		}, verdict{"Noisy cluster: RSS grows ≤ 10% with the noise", g <= 0.10,
			fmt.Sprintf("%+.0f%%: %s → %s", 100*g, mib(n.without.peakRSS), mib(n.withNoise.peakRSS))}
}
