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
	"strings"
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
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/testing/webhookurl"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

const scenarioNameAdmission = "admission"

// admissionResult is what admission adds to an App create and to a
// Pipeline create: sequential creates at v1, the stored version, through
// the manager's webhooks (the manifests' configurations for clusters before
// 1.36), through the admission policies the API server runs itself
// (manifests/policies), and through neither, in the same run.
type admissionResult struct {
	creates         int
	apps, pipelines admissionRows
}

// admissionRows are one kind's creates under each admission; install is
// the default install on 1.36, the policies and manifests/default's webhook
// configurations (inert for Apps, the overlap check for Pipelines).
type admissionRows struct{ webhooks, policies, install, without admissionRun }

// admissionRun is the latency of the timed creates and the CPU they cost
// per App: the API server's, and the webhooks-only manager's.
type admissionRun struct {
	latencies
	apiserverCPU, managerCPU time.Duration
}

func (r admissionRun) String() string {
	return fmt.Sprintf("%s, API server CPU %s and manager CPU %s per object", r.latencies,
		r.apiserverCPU.Round(10*time.Microsecond), r.managerCPU.Round(10*time.Microsecond))
}

type latencies struct{ p50, p99 time.Duration }

func (l latencies) String() string {
	return fmt.Sprintf("p50 %s, p99 %s", l.p50.Round(10*time.Microsecond), l.p99.Round(10*time.Microsecond))
}

// added is what run adds to the creates without admission, at each
// percentile.
func (r admissionRows) added(run admissionRun) latencies {
	return latencies{p50: run.p50 - r.without.p50, p99: run.p99 - r.without.p99}
}

var webhookConfigGVRs = map[string]schema.GroupVersionResource{
	"MutatingWebhookConfiguration":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	"ValidatingWebhookConfiguration": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
}

// creator creates one object of a kind as the admission run times it:
// valid, or one every admission refuses (bad); for real, or as a dry run.
type creator func(ctx context.Context, name string, bad, dryRun bool) error

func createOptions(dryRun bool) metav1.CreateOptions {
	if dryRun {
		return metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return metav1.CreateOptions{}
}

// appCreator creates benchApps in ns; a bad one has an image no runtime
// can pull (a repository name is lower case).
func appCreator(c *cluster, ns string) creator {
	return func(ctx context.Context, name string, bad, dryRun bool) error {
		app := benchApp(name)
		if bad {
			app.Spec.Image = "Nginx"
		}
		_, err := c.crd.AppV1().Apps(ns).Create(ctx, app, createOptions(dryRun))
		return err
	}
}

// benchPipelineLabel marks the scenario's Pipelines, which are
// cluster-scoped, for their deletion.
const benchPipelineLabel = "bench.ndsl.cn/admission"

// pipelineCreator creates benchPipelines; a bad one runs an image ID,
// which names no repository.
func pipelineCreator(c *cluster) creator {
	return func(ctx context.Context, name string, bad, dryRun bool) error {
		p := benchPipeline(name)
		if bad {
			p.Spec.Steps[0].Image = strings.Repeat("ab", 32)
		}
		_, err := c.crd.PipelineV1().Pipelines().Create(ctx, p, createOptions(dryRun))
		return err
	}
}

// benchPipeline is a valid one-step Pipeline at v1, with a model directory
// of its own (the webhook refuses overlapping ones).
func benchPipeline(name string) *pipelinev1.Pipeline {
	return &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchPipelineLabel: "true"}},
		Spec: pipelinev1.PipelineSpec{
			Steps:        []pipelinev1.PipelineStep{{Model: "facedetection-1", Image: "nginx:1.27", Replicas: ptr.To[int32](1)}},
			ModelStorage: pipelinev1.ModelStorage{NFS: &pipelinev1.NFSStorage{Server: "192.168.20.235", Path: "/models/bench/" + name}},
		},
	}
}

// scenarioAdmission runs a manager serving webhooks only (as every replica
// does), installs the manifests' webhook configurations pointed at it on
// 127.0.0.1, and times sequential App and Pipeline creates with them; after
// deleting them, through the admission policies; and after deleting those,
// without.
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
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	configs, err := webhookConfigurations(base, "default-webhooks")
	if err != nil {
		return res, err
	}
	installConfigs, err := webhookConfigurations(base, "default")
	if err != nil {
		return res, err
	}
	remove := func() error {
		for _, obj := range append(configs, installConfigs...) {
			err := dyn.Resource(webhookConfigGVRs[obj.GetKind()]).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	}
	defer func() { _ = remove() }()

	ns := "bench-admission"
	if err := c.createNamespace(ctx, ns); err != nil {
		return res, err
	}
	defer func() { _ = c.deleteNamespace(context.WithoutCancel(ctx), ns, cfg.cleanupTimeout) }()
	defer func() {
		_ = c.crd.PipelineV1().Pipelines().DeleteCollection(context.WithoutCancel(ctx), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: benchPipelineLabel})
	}()
	// called counts the webhook requests the manager has served.
	called := func() (float64, error) {
		ms, err := scrape(ctx, m.Base())
		if err != nil {
			return 0, err
		}
		return ms.sum("controller_manager_webhook_requests_total", nil), nil
	}
	kinds := []struct {
		name   string
		create creator
		rows   *admissionRows
	}{{"App", appCreator(c, ns), &res.apps}, {"Pipeline", pipelineCreator(c), &res.pipelines}}
	creators := make([]creator, len(kinds))
	for i, k := range kinds {
		creators[i] = k.create
	}
	// install creates objs, and is done once a dry run of each of probes
	// reaches the manager: the API server has the configurations and the
	// manager has filled in their caBundle.
	install := func(ctx context.Context, objs []*unstructured.Unstructured, probes []creator) error {
		for _, obj := range objs {
			if _, err := dyn.Resource(webhookConfigGVRs[obj.GetKind()]).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, create := range probes {
				before, err := called()
				if err != nil {
					return false, nil
				}
				if err := create(ctx, "probe", false, true); err != nil {
					return false, nil
				}
				if after, err := called(); err != nil || after == before {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the API server to call the webhooks: %w; manager log:\n%s", err, m.LogTail())
		}
		return nil
	}
	if err := install(ctx, configs, creators); err != nil {
		return res, err
	}

	if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
		return res, err
	}
	for _, k := range kinds {
		logger.Info("Timing creates through the webhooks", "kind", k.name, "creates", cfg.admissionCreates)
		if k.rows.webhooks, err = timeCreates(ctx, k.create, "webhooks", cfg.admissionCreates); err != nil {
			return res, err
		}
	}
	if err := remove(); err != nil {
		return res, err
	}
	// The webhooks are off once no create reaches the manager.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		before, err := called()
		if err != nil {
			return false, nil
		}
		for _, create := range creators {
			if err := create(ctx, "probe", false, true); err != nil {
				return false, nil
			}
		}
		after, err := called()
		return err == nil && after == before, nil
	}); err != nil {
		return res, fmt.Errorf("waiting for the API server to stop calling the webhooks: %w", err)
	}
	// With the policies, the default install's webhooks: only the
	// Pipeline one is ever called.
	installDefault := func(ctx context.Context) error {
		return install(ctx, installConfigs, []creator{pipelineCreator(c)})
	}
	policyRuns, installRuns, err := timePolicyCreates(ctx, c, cfg, creators, installDefault, remove)
	if err != nil {
		return res, err
	}
	for i, k := range kinds {
		k.rows.policies, k.rows.install = policyRuns[i], installRuns[i]
		logger.Info("Timing creates without admission", "kind", k.name, "creates", cfg.admissionCreates)
		if k.rows.without, err = timeCreates(ctx, k.create, "without", cfg.admissionCreates); err != nil {
			return res, err
		}
	}
	for _, k := range kinds {
		logger.Info("Admission", "kind", k.name, "webhooks", k.rows.webhooks.String(), "policies", k.rows.policies.String(),
			"install", k.rows.install.String(), "without", k.rows.without.String())
	}
	return res, nil
}

// timePolicyCreates installs manifests/policies, times creates of each
// kind through them, then through them and the default install's webhooks
// (install, then remove), and deletes them again. The Pipeline policy's
// param is the manager's namespace, default here.
func timePolicyCreates(ctx context.Context, c *cluster, cfg config, kinds []creator, install func(context.Context) error, remove func() error) (policyRuns, installRuns []admissionRun, err error) {
	policies, err := controlplane.LoadAdmissionPolicies()
	if err != nil {
		return nil, nil, err
	}
	for _, b := range policies.ValidatingBindings {
		if b.Spec.ParamRef != nil {
			b.Spec.ParamRef.Name = "default"
		}
	}
	defer func() { _ = policies.Delete(context.WithoutCancel(ctx), c.kube) }()
	if err := policies.Install(ctx, c.kube, nil); err != nil {
		return nil, nil, err
	}
	// The API server loads policies asynchronously: they act once a bad
	// create of each kind is refused, and have stopped once every one is
	// admitted again.
	refused := func(ctx context.Context) int {
		n := 0
		for _, create := range kinds {
			if err := create(ctx, "probe", true, true); apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
				n++
			}
		}
		return n
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return refused(ctx) == len(kinds), nil
	}); err != nil {
		return nil, nil, fmt.Errorf("waiting for the API server to enforce the admission policies: %w", err)
	}
	if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
		return nil, nil, err
	}
	for i, create := range kinds {
		klog.FromContext(ctx).Info("Timing creates through the admission policies", "kind", i, "creates", cfg.admissionCreates)
		run, err := timeCreates(ctx, create, "policies", cfg.admissionCreates)
		if err != nil {
			return nil, nil, err
		}
		policyRuns = append(policyRuns, run)
	}
	if err := install(ctx); err != nil {
		return nil, nil, fmt.Errorf("the default install's webhooks: %w", err)
	}
	if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
		return nil, nil, err
	}
	for i, create := range kinds {
		klog.FromContext(ctx).Info("Timing creates through the default install's admission", "kind", i, "creates", cfg.admissionCreates)
		run, err := timeCreates(ctx, create, "install", cfg.admissionCreates)
		if err != nil {
			return nil, nil, err
		}
		installRuns = append(installRuns, run)
	}
	if err := remove(); err != nil {
		return nil, nil, err
	}
	if err := policies.Delete(ctx, c.kube); err != nil {
		return nil, nil, err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return refused(ctx) == 0, nil
	}); err != nil {
		return nil, nil, fmt.Errorf("waiting for the API server to drop the admission policies: %w", err)
	}
	return policyRuns, installRuns, nil
}

// webhookConfigurations builds the webhook configurations of an install,
// manifests/<dir> (default-webhooks: for clusters before 1.36), and points
// them at base.
func webhookConfigurations(base, dir string) ([]*unstructured.Unstructured, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		return nil, err
	}
	built, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "manifests", dir)).Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize manifests/%s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(built), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decoding manifests/%s: %w", dir, err)
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
		return nil, fmt.Errorf("manifests/%s builds %d webhook configurations, want 2", dir, len(out))
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

// timeCreates creates n objects one after another, after a few untimed
// ones, and returns the percentiles of their latencies and the CPU per
// object.
func timeCreates(ctx context.Context, create creator, prefix string, n int) (admissionRun, error) {
	const warmup = 20
	durations := make([]time.Duration, 0, n)
	var cpu0 cpuSnapshot
	for i := range n + warmup {
		if i == warmup {
			cpu0 = takeCPUSnapshot()
		}
		start := time.Now()
		if err := create(ctx, fmt.Sprintf("%s-%d", prefix, i), false, false); err != nil {
			return admissionRun{}, fmt.Errorf("creating %s-%d: %w", prefix, i, err)
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
