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
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/testing/webhookurl"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

const scenarioNameAdmission = "admission"

// admissionResult is what the webhooks add to an App create: the latency
// of sequential creates with the manifests' webhook configurations
// installed, and without them, in the same run.
type admissionResult struct {
	creates       int
	with, without latencies
}

type latencies struct{ p50, p99 time.Duration }

func (l latencies) String() string {
	return fmt.Sprintf("p50 %s, p99 %s", l.p50.Round(10*time.Microsecond), l.p99.Round(10*time.Microsecond))
}

// added is the webhooks' share of a create, at each percentile.
func (r admissionResult) added() latencies {
	return latencies{p50: r.with.p50 - r.without.p50, p99: r.with.p99 - r.without.p99}
}

var webhookConfigGVRs = map[string]schema.GroupVersionResource{
	"MutatingWebhookConfiguration":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	"ValidatingWebhookConfiguration": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
}

// scenarioAdmission runs a manager serving webhooks only (as every replica
// does), installs the manifests' webhook configurations pointed at it on
// 127.0.0.1, and times sequential App creates with them and, after deleting
// them, without.
func scenarioAdmission(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (admissionResult, error) {
	logger := klog.FromContext(ctx)
	res := admissionResult{creates: cfg.admissionCreates}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return res, err
	}
	port := ports[0]
	m, err := startBinaryManager(ctx, l, "webhooks", append([]string{"--leader-elect=false", "--controllers=",
		"--webhooks=true", "--webhook-address=127.0.0.1", fmt.Sprintf("--webhook-port=%d", port),
		"--webhook-cert-extra-names=127.0.0.1", "--webhook-namespace=default"}, cfg.managerArgs...)...)
	if err != nil {
		return res, err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	if err := waitManagerReady(ctx, m, 2*time.Minute, time.Second); err != nil {
		return res, err
	}

	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		return res, err
	}
	configs, err := webhookConfigurations(fmt.Sprintf("https://127.0.0.1:%d", port))
	if err != nil {
		return res, err
	}
	remove := func() error {
		for _, obj := range configs {
			err := dyn.Resource(webhookConfigGVRs[obj.GetKind()]).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	}
	defer func() { _ = remove() }()
	for _, obj := range configs {
		if _, err := dyn.Resource(webhookConfigGVRs[obj.GetKind()]).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return res, fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}

	ns := "bench-admission"
	if err := c.createNamespace(ctx, ns); err != nil {
		return res, err
	}
	defer func() { _ = c.deleteNamespace(context.WithoutCancel(ctx), ns, cfg.cleanupTimeout) }()
	// Admission is on once the manager has counted a request: the API server
	// has the configurations and the manager has filled in their caBundle.
	called := func() (float64, error) {
		ms, err := scrape(ctx, m.Base())
		if err != nil {
			return 0, err
		}
		return ms.sum("controller_manager_webhook_requests_total", nil), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		before, err := called()
		if err != nil {
			return false, nil
		}
		if _, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, benchApp("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, nil
		}
		after, err := called()
		return err == nil && after > before, nil
	}); err != nil {
		return res, fmt.Errorf("waiting for the API server to call the webhooks: %w; manager log:\n%s", err, m.LogTail())
	}

	if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
		return res, err
	}
	logger.Info("Timing App creates through the webhooks", "creates", cfg.admissionCreates)
	if res.with, err = timeCreates(ctx, c, ns, "with", cfg.admissionCreates); err != nil {
		return res, err
	}
	if err := remove(); err != nil {
		return res, err
	}
	// The webhooks are off once a create no longer reaches the manager.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		before, err := called()
		if err != nil {
			return false, nil
		}
		if _, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, benchApp("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, nil
		}
		after, err := called()
		return err == nil && after == before, nil
	}); err != nil {
		return res, fmt.Errorf("waiting for the API server to stop calling the webhooks: %w", err)
	}
	logger.Info("Timing App creates without webhooks", "creates", cfg.admissionCreates)
	if res.without, err = timeCreates(ctx, c, ns, "without", cfg.admissionCreates); err != nil {
		return res, err
	}
	logger.Info("Admission latency", "with", res.with.String(), "without", res.without.String(), "added", res.added().String())
	return res, nil
}

// webhookConfigurations reads the manifests' webhook configurations and
// points them at base.
func webhookConfigurations(base string) ([]*unstructured.Unstructured, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, file := range []string{"mutating.yaml", "validating.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "manifests", "webhook", file))
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if _, err := webhookurl.Rewrite(obj, base); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// benchApp is a valid App: a Service, so that the notes' inversion of
// enable_ingress is allowed.
func benchApp(name string) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), EnableService: true},
	}
}

// timeCreates creates n Apps one after another, after a few untimed ones,
// and returns the percentiles of their latencies.
func timeCreates(ctx context.Context, c *cluster, ns, prefix string, n int) (latencies, error) {
	const warmup = 20
	durations := make([]time.Duration, 0, n)
	for i := range n + warmup {
		start := time.Now()
		if _, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, benchApp(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{}); err != nil {
			return latencies{}, fmt.Errorf("creating App %s-%d: %w", prefix, i, err)
		}
		if i >= warmup {
			durations = append(durations, time.Since(start))
		}
	}
	slices.Sort(durations)
	at := func(q float64) time.Duration { return durations[min(len(durations)-1, int(q*float64(len(durations))))] }
	return latencies{p50: at(0.50), p99: at(0.99)}, nil
}
