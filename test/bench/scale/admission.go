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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/testing/webhookurl"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

const scenarioNameAdmission = "admission"

// admissionResult is what admission adds to an App create: sequential
// creates at v1, the stored version, through the manager's webhooks (the manifests' configurations
// for clusters before 1.36), through the admission policies the API server
// runs itself (manifests/policies), and through neither, in the same run.
type admissionResult struct {
	creates                     int
	webhooks, policies, without admissionRun
}

// admissionRun is the latency of the timed creates and the CPU they cost
// per App: the API server's, and the webhooks-only manager's.
type admissionRun struct {
	latencies
	apiserverCPU, managerCPU time.Duration
}

func (r admissionRun) String() string {
	return fmt.Sprintf("%s, API server CPU %s and manager CPU %s per App", r.latencies,
		r.apiserverCPU.Round(10*time.Microsecond), r.managerCPU.Round(10*time.Microsecond))
}

type latencies struct{ p50, p99 time.Duration }

func (l latencies) String() string {
	return fmt.Sprintf("p50 %s, p99 %s", l.p50.Round(10*time.Microsecond), l.p99.Round(10*time.Microsecond))
}

// added is what r adds to the creates without admission, at each percentile.
func (r admissionResult) added(run admissionRun) latencies {
	return latencies{p50: run.p50 - r.without.p50, p99: run.p99 - r.without.p99}
}

var webhookConfigGVRs = map[string]schema.GroupVersionResource{
	"MutatingWebhookConfiguration":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	"ValidatingWebhookConfiguration": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
}

// scenarioAdmission runs a manager serving webhooks only (as every replica
// does), installs the manifests' webhook configurations pointed at it on
// 127.0.0.1, and times sequential App creates with them; after deleting
// them, through the admission policies; and after deleting those, without.
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
		if _, err := c.crd.AppV1().Apps(ns).Create(ctx, benchApp("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
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
	if res.webhooks, err = timeCreates(ctx, c, ns, "webhooks", cfg.admissionCreates); err != nil {
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
		if _, err := c.crd.AppV1().Apps(ns).Create(ctx, benchApp("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, nil
		}
		after, err := called()
		return err == nil && after == before, nil
	}); err != nil {
		return res, fmt.Errorf("waiting for the API server to stop calling the webhooks: %w", err)
	}
	if res.policies, err = timePolicyCreates(ctx, c, cfg, ns); err != nil {
		return res, err
	}
	logger.Info("Timing App creates without admission", "creates", cfg.admissionCreates)
	if res.without, err = timeCreates(ctx, c, ns, "without", cfg.admissionCreates); err != nil {
		return res, err
	}
	logger.Info("Admission", "webhooks", res.webhooks.String(), "policies", res.policies.String(), "without", res.without.String())
	return res, nil
}

// timePolicyCreates installs manifests/policies, times App creates through
// them, and deletes them again.
func timePolicyCreates(ctx context.Context, c *cluster, cfg config, ns string) (admissionRun, error) {
	policies, err := controlplane.LoadAdmissionPolicies()
	if err != nil {
		return admissionRun{}, err
	}
	defer func() { _ = policies.Delete(context.WithoutCancel(ctx), c.kube) }()
	if err := policies.Install(ctx, c.kube, nil); err != nil {
		return admissionRun{}, err
	}
	// The API server loads policies asynchronously: they act once an App
	// with an image no runtime can pull is refused, and have stopped once
	// it is admitted again.
	refusing := func(ctx context.Context) (bool, error) {
		bad := benchApp("probe")
		bad.Spec.Image = "Nginx" // a repository name is lower case
		_, err := c.crd.AppV1().Apps(ns).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, refusing); err != nil {
		return admissionRun{}, fmt.Errorf("waiting for the API server to enforce the admission policies: %w", err)
	}
	if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
		return admissionRun{}, err
	}
	klog.FromContext(ctx).Info("Timing App creates through the admission policies", "creates", cfg.admissionCreates)
	run, err := timeCreates(ctx, c, ns, "policies", cfg.admissionCreates)
	if err != nil {
		return run, err
	}
	if err := policies.Delete(ctx, c.kube); err != nil {
		return run, err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		on, err := refusing(ctx)
		return !on && err == nil, nil
	})
	if err != nil {
		return run, fmt.Errorf("waiting for the API server to drop the admission policies: %w", err)
	}
	return run, nil
}

// webhookConfigurations builds the webhook configurations of the install
// with the App's admission webhooks (manifests/default-webhooks, for
// clusters before 1.36) and points them at base.
func webhookConfigurations(base string) ([]*unstructured.Unstructured, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		return nil, err
	}
	built, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "manifests", "default-webhooks")).Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize manifests/default-webhooks: %w", err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(built), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decoding manifests/default-webhooks: %w", err)
		}
		if _, ok := webhookConfigGVRs[obj.GetKind()]; !ok {
			continue
		}
		if _, err := webhookurl.Rewrite(obj, base); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("manifests/default-webhooks builds %d webhook configurations, want 2", len(out))
	}
	return out, nil
}

// benchApp is a valid App at v1, as a user writes one: no conversion on
// the way in, whichever admission runs.
func benchApp(name string) *appv1.App {
	return &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), Exposure: appv1.ExposureService},
	}
}

// timeCreates creates n Apps one after another, after a few untimed ones,
// and returns the percentiles of their latencies and the CPU per App.
func timeCreates(ctx context.Context, c *cluster, ns, prefix string, n int) (admissionRun, error) {
	const warmup = 20
	durations := make([]time.Duration, 0, n)
	var cpu0 cpuSnapshot
	for i := range n + warmup {
		if i == warmup {
			cpu0 = takeCPUSnapshot()
		}
		start := time.Now()
		if _, err := c.crd.AppV1().Apps(ns).Create(ctx, benchApp(fmt.Sprintf("%s-%d", prefix, i)), metav1.CreateOptions{}); err != nil {
			return admissionRun{}, fmt.Errorf("creating App %s-%d: %w", prefix, i, err)
		}
		if i >= warmup {
			durations = append(durations, time.Since(start))
		}
	}
	cpu := cpu0.until(takeCPUSnapshot())
	perApp := func(process string) time.Duration {
		return time.Duration(cpu.Cores[process] * float64(cpu.Wall) / float64(n))
	}
	slices.Sort(durations)
	at := func(q float64) time.Duration { return durations[min(len(durations)-1, int(q*float64(len(durations))))] }
	return admissionRun{latencies: latencies{p50: at(0.50), p99: at(0.99)},
		apiserverCPU: perApp("kube-apiserver"), managerCPU: perApp("controller-manager")}, nil
}
