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

// Package manifests checks what users install: every kustomization builds,
// RBAC has no wildcards, the Deployment is hardened, and the Grafana
// dashboard only queries metrics the manager really exports.
package manifests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/webhook"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}

// build runs kubectl kustomize on a directory under manifests/ and returns its documents.
func build(t *testing.T, dir string) []map[string]any {
	t.Helper()
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "manifests", dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/%s: %v", dir, err)
	}
	var docs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("manifests/%s builds to nothing", dir)
	}
	return docs
}

func convert(t testingT, doc map[string]any, into any) {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

func TestEveryKustomizationBuilds(t *testing.T) {
	for _, dir := range []string{"crd", "rbac", "manager", "webhook", "default", "pipeline-namespace"} {
		build(t, dir)
	}
	// Each component on its own over manifests/default, as well as all
	// together (TestComponentsComposeIntoTheUsersNamespace).
	for _, c := range []string{"prometheus", "alerts", "grafana", "cert-manager", "cleanup"} {
		compose(t, "", c)
	}
}

func TestRBACHasNoWildcards(t *testing.T) {
	_, all := compose(t, "")
	for _, doc := range all {
		kind := doc["kind"]
		if kind != "ClusterRole" && kind != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		convert(t, doc, &role)
		for _, rule := range role.Rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.NonResourceURLs} {
				for _, v := range list {
					if strings.Contains(v, "*") {
						t.Errorf("%s %s has a wildcard rule: %+v", kind, role.Name, rule)
					}
				}
			}
		}
	}
}

// Issue 12, defect 8: the Cleanup controller is off by default, so the
// default install grants none of its cluster-wide deletes; the component
// that turns it on brings its ClusterRole and binding.
func TestCleanupRightsAreOptIn(t *testing.T) {
	const role = "ndsl-controller-manager:cleanup"
	find := func(components ...string) (roles, bindings int, args []string) {
		docs := build(t, "default")
		if len(components) > 0 {
			_, docs = compose(t, "", components...)
		}
		for _, doc := range docs {
			switch doc["kind"] {
			case "ClusterRole":
				var r rbacv1.ClusterRole
				convert(t, doc, &r)
				if r.Name == role {
					roles++
				}
			case "ClusterRoleBinding":
				var b rbacv1.ClusterRoleBinding
				convert(t, doc, &b)
				if b.RoleRef.Name == role {
					bindings++
				}
			case "Deployment":
				var d appsv1.Deployment
				convert(t, doc, &d)
				args = expandedArgs(t, docs, d.Spec.Template.Spec.Containers[0])
			}
		}
		return roles, bindings, args
	}
	enablesCleanup := func(args []string) bool {
		fs := options.NewOptions()
		flags := app.NewRegistry().Flags(fs)
		set := flags.FlagSet("all")
		options.AddAll(set, flags)
		if err := set.Parse(args); err != nil {
			t.Fatalf("the Deployment's args do not parse: %v", err)
		}
		return slices.Contains(fs.Generic.Controllers, "cleanup")
	}
	if roles, bindings, args := find(); roles != 0 || bindings != 0 || enablesCleanup(args) {
		t.Errorf("manifests/default: %d ClusterRoles and %d bindings of %s, cleanup enabled %v: want none, the controller is off by default",
			roles, bindings, role, enablesCleanup(args))
	}
	if roles, bindings, args := find("cleanup"); roles != 1 || bindings != 1 || !enablesCleanup(args) {
		t.Errorf("manifests/components/cleanup: %d ClusterRoles and %d bindings of %s, cleanup enabled %v: want one each, and enabled",
			roles, bindings, role, enablesCleanup(args))
	}
}

// expandedArgs are c's arguments as the kubelet passes them: each $(VAR)
// replaced by the value of the env var, which the ConfigMaps of the build
// hold (the Pipeline flags, from controller-manager-pipeline-options). A
// variable left unexpanded fails the test.
func expandedArgs(t *testing.T, docs []map[string]any, c corev1.Container) []string {
	t.Helper()
	data := map[string]map[string]string{}
	for _, doc := range docs {
		if doc["kind"] == "ConfigMap" {
			var cm corev1.ConfigMap
			convert(t, doc, &cm)
			data[cm.Name] = cm.Data
		}
	}
	var args []string
	for _, a := range c.Args {
		for _, e := range c.Env {
			value := e.Value
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				ref := e.ValueFrom.ConfigMapKeyRef
				v, ok := data[ref.Name][ref.Key]
				if !ok {
					t.Errorf("env %s: the build has no ConfigMap %s with key %s", e.Name, ref.Name, ref.Key)
				}
				value = v
			}
			a = strings.ReplaceAll(a, "$("+e.Name+")", value)
		}
		if strings.Contains(a, "$(") {
			t.Errorf("argument %q names a variable the container does not define", a)
		}
		args = append(args, a)
	}
	return args
}

func TestDeploymentIsHardenedAndHighlyAvailable(t *testing.T) {
	var d *appsv1.Deployment
	docs := build(t, "default")
	for _, doc := range docs {
		if doc["kind"] == "Deployment" {
			d = &appsv1.Deployment{}
			convert(t, doc, d)
		}
	}
	if d == nil {
		t.Fatal("no Deployment in manifests/default")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas = %v, want at least 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("pod security context %+v: want runAsNonRoot and seccomp RuntimeDefault", pod.SecurityContext)
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Error("no pod anti-affinity across nodes")
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v: want read-only root, no privilege escalation, drop ALL", sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("probes must be /healthz (liveness) and /readyz (readiness)")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}
	// The manager's flags in the manifest must parse.
	fs := options.NewOptions()
	flags := app.NewRegistry().Flags(fs)
	set := flags.FlagSet("all")
	options.AddAll(set, flags)
	if err := set.Parse(expandedArgs(t, docs, c)); err != nil {
		t.Errorf("the Deployment's args do not parse: %v", err)
	}
	checkShutdownTimings(t, pod, fs.Generic)
}

// checkShutdownTimings: the lame duck fits the pod's timings. The kubelet
// waits for the drain, the shutdown delay and the webhook server's stop
// (webhook.MaxStopTime) before it kills the container, and the
// readiness probe sees the replica unready, so that the endpoints drop it,
// well within the shutdown delay, while it still serves.
func checkShutdownTimings(t *testing.T, pod corev1.PodSpec, g options.GenericOptions) {
	t.Helper()
	webhookShutdown := webhook.MaxStopTime()
	if g.ShutdownDelay < 3*time.Second {
		t.Errorf("--shutdown-delay-duration = %s, want at least 3s for the endpoints to drop the replica", g.ShutdownDelay)
	}
	grace := time.Duration(ptr.Deref(pod.TerminationGracePeriodSeconds, 30)) * time.Second
	if need := g.ShutdownDelay + g.ShutdownTimeout + webhookShutdown; grace < need {
		t.Errorf("terminationGracePeriodSeconds = %s, want at least --shutdown-delay-duration + --shutdown-timeout + %s = %s", grace, webhookShutdown, need)
	}
	p := pod.Containers[0].ReadinessProbe
	if p == nil {
		return
	}
	failures, period := p.FailureThreshold, p.PeriodSeconds
	if failures == 0 {
		failures = 3 // the API server's default
	}
	if period == 0 {
		period = 10 // the API server's default
	}
	// Leave 1 s for the EndpointSlice and the proxies to follow.
	if unready := time.Duration(period*failures) * time.Second; unready > g.ShutdownDelay-time.Second {
		t.Errorf("the readiness probe needs up to %s (periodSeconds × failureThreshold) to see a shutting-down replica, want at most --shutdown-delay-duration - 1s = %s", unready, g.ShutdownDelay-time.Second)
	}
}

// metricName finds the metric names a PromQL expression uses.
var metricName = regexp.MustCompile(`\b([a-z_]+_(?:total|seconds_bucket|depth|workers|status|bytes))\b`)

// The dashboard and the alert rules query only metrics the manager exports.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "components", "grafana", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := yaml.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}

	// A manager with leader election, so leader_election_master_status is
	// exported, and one reconcile done, so the per-controller series exist.
	ns := framework.CreateNamespace(t, cp.Client)
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{"ingress"}
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = ns
	})
	// The Ingress controller caches only annotated Services: give it one.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dashboard", Annotations: map[string]string{"ingress/http": "true"}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cp.Client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var body string
	framework.Eventually(t, 30*time.Second, "reconcile metrics", func(context.Context) (bool, error) {
		var err error
		_, body, err = m.Get("/metrics")
		return strings.Contains(body, "controller_manager_reconcile_total{") &&
			strings.Contains(body, "controller_manager_reconcile_duration_seconds_bucket{") &&
			strings.Contains(body, "leader_election_master_status{"), err
	})

	checked := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				checked++
				if !strings.Contains(body, "\n"+name+"{") && !strings.Contains(body, "\n"+name+" ") {
					t.Errorf("panel %q queries %s, which the manager does not export", p.Title, name)
				}
			}
		}
	}
	if checked < len(dash.Panels) {
		t.Errorf("found only %d metric names in %d panels", checked, len(dash.Panels))
	}

	// Issue 23: the alert rules' metrics too, but the webhooks' (checked
	// in test/integration/webhook, where a replica serves them).
	for _, name := range framework.AlertRuleMetrics(t, "") {
		if !strings.HasPrefix(name, "controller_manager_webhook_") && !framework.Exports(body, name) {
			t.Errorf("the alert rules query %s, which the manager does not export", name)
		}
	}
}

// The webhooks fail closed (the Pipeline webhook beside the policies
// excepted; where the component puts the webhooks back, it fails closed
// too), have no side effects, answer fast, match
// requests in every version, leave the manager's own namespace alone, and
// reach the manager through a Service that selects its pods' webhook port.
func TestWebhooksFailClosedAndReachTheManager(t *testing.T) {
	docs := build(t, "default")
	var (
		services   = map[string]corev1.Service{}
		deployment appsv1.Deployment
		hooks      []admissionregistrationv1.ValidatingWebhook // the fields both kinds share
		conversion []apiextensionsv1.CustomResourceDefinition
	)
	for _, doc := range docs {
		switch doc["kind"] {
		case "Service":
			var s corev1.Service
			convert(t, doc, &s)
			services[s.Name] = s
		case "Deployment":
			convert(t, doc, &deployment)
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			convert(t, doc, &c)
			for _, h := range c.Webhooks {
				if h.ReinvocationPolicy == nil || *h.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
					t.Errorf("mutating webhook %s: reinvocationPolicy %v, want IfNeeded (the mutation is idempotent)", h.Name, h.ReinvocationPolicy)
				}
				hooks = append(hooks, admissionregistrationv1.ValidatingWebhook{Name: h.Name, ClientConfig: h.ClientConfig, Rules: h.Rules,
					FailurePolicy: h.FailurePolicy, MatchPolicy: h.MatchPolicy, NamespaceSelector: h.NamespaceSelector, SideEffects: h.SideEffects,
					TimeoutSeconds: h.TimeoutSeconds, AdmissionReviewVersions: h.AdmissionReviewVersions})
			}
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			convert(t, doc, &c)
			hooks = append(hooks, c.Webhooks...)
		case "CustomResourceDefinition":
			var crd apiextensionsv1.CustomResourceDefinition
			convert(t, doc, &crd)
			if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
				conversion = append(conversion, crd)
			}
		}
	}
	if len(hooks) == 0 || len(conversion) == 0 {
		t.Fatalf("%d admission webhooks and %d CRDs with conversion webhooks in manifests/default", len(hooks), len(conversion))
	}
	webhookPort := false
	for _, c := range deployment.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			webhookPort = webhookPort || (p.Name == "webhook" && p.ContainerPort == 9443)
		}
	}
	if !webhookPort {
		t.Error("the Deployment has no container port named webhook (9443)")
	}
	checkService := func(what string, ref *admissionregistrationv1.ServiceReference) {
		if ref == nil {
			t.Errorf("%s: no clientConfig.service", what)
			return
		}
		svc, ok := services[ref.Name]
		if !ok || ref.Namespace != "ndsl-system" || svc.Namespace != "ndsl-system" {
			t.Errorf("%s: Service %s/%s is not installed", what, ref.Namespace, ref.Name)
			return
		}
		port := int32(443)
		if ref.Port != nil {
			port = *ref.Port
		}
		for _, p := range svc.Spec.Ports {
			if p.Port == port && p.TargetPort.StrVal == "webhook" {
				for k, v := range svc.Spec.Selector {
					if deployment.Spec.Template.Labels[k] != v {
						t.Errorf("%s: Service %s does not select the manager's pods", what, svc.Name)
					}
				}
				return
			}
		}
		t.Errorf("%s: Service %s has no port %d to the webhook port", what, svc.Name, port)
	}
	for _, h := range hooks {
		// Beside the admission policies, which admit Pipelines with no
		// replica up, the Pipeline webhook fails open: it adds the check of
		// overlapping directories while a replica answers.
		want := admissionregistrationv1.Fail
		if h.Name == "validate.pipelines.distri-infer.ndsl.cn" {
			want = admissionregistrationv1.Ignore
		}
		if h.FailurePolicy == nil || *h.FailurePolicy != want {
			t.Errorf("webhook %s: failurePolicy %v, want %s", h.Name, ptr.Deref(h.FailurePolicy, ""), want)
		}
		if h.SideEffects == nil || *h.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("webhook %s: sideEffects %v, want None", h.Name, h.SideEffects)
		}
		if h.TimeoutSeconds == nil || *h.TimeoutSeconds > 5 {
			t.Errorf("webhook %s: timeoutSeconds %v, want at most 5", h.Name, h.TimeoutSeconds)
		}
		// Apps and Pipelines are matched at the version sent, both listed: a
		// request through the stored version needs no conversion to be
		// matched.
		wantPolicy := admissionregistrationv1.Exact
		if len(h.Rules) != 1 || !slices.Equal(h.Rules[0].APIVersions, []string{"v1beta1", "v1"}) {
			t.Errorf("webhook %s: rules %v, want one for v1beta1 and v1", h.Name, h.Rules)
		}
		if h.MatchPolicy == nil || *h.MatchPolicy != wantPolicy {
			t.Errorf("webhook %s: matchPolicy %v, want %s", h.Name, ptr.Deref(h.MatchPolicy, ""), wantPolicy)
		}
		if len(h.AdmissionReviewVersions) != 1 || h.AdmissionReviewVersions[0] != "v1" {
			t.Errorf("webhook %s: admissionReviewVersions %v, want [v1]", h.Name, h.AdmissionReviewVersions)
		}
		if !excludesNamespace(h.NamespaceSelector, "ndsl-system") || !excludesNamespace(h.NamespaceSelector, "kube-system") {
			t.Errorf("webhook %s: namespaceSelector %v must leave ndsl-system and kube-system out", h.Name, h.NamespaceSelector)
		}
		for _, r := range h.Rules {
			for _, g := range r.APIGroups {
				if g != "ingress.example.com" && g != "distri-infer.ndsl.cn" {
					t.Errorf("webhook %s matches group %q: only the manager's own APIs", h.Name, g)
				}
			}
		}
		checkService("webhook "+h.Name, h.ClientConfig.Service)
	}
	for _, crd := range conversion {
		w := crd.Spec.Conversion.Webhook
		if w == nil || w.ClientConfig == nil || w.ClientConfig.Service == nil {
			t.Errorf("CRD %s: conversion webhook without a Service", crd.Name)
			continue
		}
		s := w.ClientConfig.Service
		checkService("CRD "+crd.Name, &admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port})
	}
}

// Where manifests/components/admission-webhooks replaces the policies, every
// webhook fails closed and none is kept uncalled: nothing else admits.
func TestWebhooksAloneFailClosed(t *testing.T) {
	var policies int
	for _, doc := range build(t, "default-webhooks") {
		switch doc["kind"] {
		case "ValidatingAdmissionPolicy", "MutatingAdmissionPolicy":
			policies++
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			convert(t, doc, &c)
			for _, h := range c.Webhooks {
				if h.FailurePolicy == nil || *h.FailurePolicy != admissionregistrationv1.Fail || framework.NeverCalled(h.MatchConditions) {
					t.Errorf("webhook %s: failurePolicy %v, match conditions %v; want Fail and called", h.Name, ptr.Deref(h.FailurePolicy, ""), h.MatchConditions)
				}
			}
		}
	}
	if policies != 0 {
		t.Errorf("manifests/default-webhooks has %d admission policies, want none", policies)
	}
}

// excludesNamespace tells whether selector leaves namespace out.
func excludesNamespace(selector *metav1.LabelSelector, namespace string) bool {
	if selector == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false
	}
	return !s.Matches(labels.Set{"kubernetes.io/metadata.name": namespace}) && s.Matches(labels.Set{"kubernetes.io/metadata.name": "default"})
}
