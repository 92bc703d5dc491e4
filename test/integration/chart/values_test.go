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

package chart

import (
	batchv1 "k8s.io/api/batch/v1"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// everything turns on every optional part, and sets every pod-level value.
func everything(certificates string) map[string]any {
	return withValues(podExtras, map[string]any{
		"cleanup":       map[string]any{"enabled": true},
		"networkPolicy": map[string]any{"enabled": true},
		"webhooks":      map[string]any{"certificates": certificates},
		"metrics": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true},
			"prometheusRule": map[string]any{"enabled": true},
			"dashboard":      map[string]any{"enabled": true},
			"readers":        []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}},
		},
	})
}

// namespaced kinds the chart renders.
var namespaced = []string{"Deployment", "Service", "ServiceAccount", "Secret", "ConfigMap", "Role", "RoleBinding",
	"PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"}

// Issue 23: the namespace comes from the release, everywhere: the objects,
// the binding subjects, the webhooks' Service references and their
// self-exclusion, the conversion webhooks, the certificate's DNS names,
// cainjector's annotation and the ServiceMonitor's serverName. Nothing says
// ndsl-system.
func TestChartNamespaceFromTheRelease(t *testing.T) {
	const ns = "platform"
	for _, tc := range []struct{ certificates, admissionBy string }{{"self", "policies"}, {"cert-manager", "policies"}, {"self", "webhooks"}} {
		certificates := tc.certificates
		t.Run(certificates+" "+tc.admissionBy, func(t *testing.T) {
			values := everything(certificates)
			values["admission"] = map[string]any{"by": tc.admissionBy}
			text, err := renderText(t, ns, values)
			if err != nil {
				t.Fatal(err)
			}
			if i := strings.Index(text, "ndsl-system"); i >= 0 {
				t.Errorf("the chart rendered in %s says ndsl-system: ...%s...", ns, text[max(0, i-200):min(len(text), i+100)])
			}
			objects := decode(t, text)
			for _, o := range objects {
				if slices.Contains(namespaced, o.kind()) && o.namespace() != ns {
					t.Errorf("%s: namespace %q, want the release's %q", o.key(), o.namespace(), ns)
				}
				for _, s := range subjects(t, o) {
					if s.Kind == "ServiceAccount" && s.Name != "prometheus" && s.Namespace != ns {
						t.Errorf("%s: subject %s/%s, want the release's namespace", o.key(), s.Namespace, s.Name)
					}
				}
			}
			hooks := webhooks(t, objects)
			if len(hooks) != 3 {
				t.Fatalf("%d admission webhooks, want 3", len(hooks))
			}
			// The App's are kept where the policies admit Apps, never
			// called; the Pipeline's fails open beside the policies (it
			// adds the overlap check while a replica answers).
			for _, h := range hooks {
				inert := framework.NeverCalled(h.MatchConditions)
				if want := tc.admissionBy == "policies" && strings.Contains(h.Name, ".apps."); inert != want {
					t.Errorf("webhook %s: never called %v, want %v", h.Name, inert, want)
				}
				want := admissionregistrationv1.Fail
				if tc.admissionBy == "policies" && strings.Contains(h.Name, ".pipelines.") {
					want = admissionregistrationv1.Ignore
				}
				if h.FailurePolicy == nil || *h.FailurePolicy != want {
					t.Errorf("webhook %s: failurePolicy %v, want %s", h.Name, h.FailurePolicy, want)
				}
			}
			bindings := append(ofKind(objects, "MutatingAdmissionPolicyBinding"), ofKind(objects, "ValidatingAdmissionPolicyBinding")...)
			if want := map[string]int{"webhooks": 0, "policies": 5}[tc.admissionBy]; len(bindings) != want {
				t.Errorf("%d admission policy bindings, want %d", len(bindings), want)
			}
			for _, b := range bindings {
				var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding // the fields both kinds share
				b.into(t, &binding)
				if sel := binding.Spec.MatchResources.NamespaceSelector; !excludes(sel, ns) || !excludes(sel, "kube-system") {
					t.Errorf("%s: namespaceSelector %v must leave %s and kube-system out", b.key(), sel, ns)
				}
				if ref := binding.Spec.ParamRef; ref != nil && (ref.Name != ns || ref.Namespace != "") {
					t.Errorf("%s: paramRef %+v, want the Namespace %s", b.key(), ref, ns)
				}
			}
			for _, h := range hooks {
				if s := h.ClientConfig.Service; s == nil || s.Namespace != ns || s.Name != "controller-manager-webhook" {
					t.Errorf("webhook %s: service %+v, want controller-manager-webhook in %s", h.Name, s, ns)
				}
				if !excludes(h.NamespaceSelector, ns) || !excludes(h.NamespaceSelector, "kube-system") {
					t.Errorf("webhook %s: namespaceSelector %v must leave %s and kube-system out", h.Name, h.NamespaceSelector, ns)
				}
			}
			for _, crd := range crds(t, asApplied(t, objects)) {
				c := crd.Spec.Conversion
				if c == nil || c.Webhook == nil || c.Webhook.ClientConfig.Service == nil || c.Webhook.ClientConfig.Service.Namespace != ns {
					t.Errorf("CRD %s: conversion %+v, want the webhook Service in %s", crd.Name, c, ns)
				}
			}
			if certificates == "cert-manager" {
				cert := one(t, objects, "Certificate", "controller-manager-webhook")
				for _, want := range []string{"controller-manager-webhook." + ns + ".svc", "controller-manager-metrics." + ns + ".svc"} {
					if !slices.Contains(dnsNames(cert), want) {
						t.Errorf("Certificate dnsNames %v lack %s", dnsNames(cert), want)
					}
				}
				for _, o := range objects {
					switch o.kind() {
					case "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
						if got := o.annotations()["cert-manager.io/inject-ca-from"]; got != ns+"/controller-manager-webhook" {
							t.Errorf("%s: cert-manager.io/inject-ca-from %v, want %s/controller-manager-webhook", o.key(), got, ns)
						}
					}
				}
			}
			sm := one(t, objects, "ServiceMonitor", "controller-manager")
			tls := sm["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)["tlsConfig"].(map[string]any)
			// The bare Service name: both certificates carry it, and it
			// holds in any namespace (the kustomize component's too).
			if tls["serverName"] != "controller-manager-metrics" {
				t.Errorf("ServiceMonitor serverName %v, want controller-manager-metrics", tls["serverName"])
			}
		})
	}
}

// Issue 23: the caBundles are the manager's (or cainjector's), written at
// run time: the chart never renders one, whatever the values, so neither
// helm install nor helm upgrade writes or removes it.
func TestChartSetsNoCABundle(t *testing.T) {
	for _, values := range []map[string]any{nil, everything("self"), everything("cert-manager")} {
		for _, o := range render(t, "ndsl-system", values) {
			if hasKey(map[string]any(o), "caBundle") {
				t.Errorf("%s has a caBundle (values %v)", o.key(), values)
			}
		}
	}
}

// The pipeline values become the manager's flags.
func TestChartPipelineValuesAreFlags(t *testing.T) {
	objects := render(t, "ndsl-system", map[string]any{"pipeline": map[string]any{
		"allowedNFS":       []any{"nfs.example.com:/models", "10.0.0.5"},
		"allowedImages":    []any{"registry.example.com/", "docker.io/library/nginx"},
		"podSecurity":      "restricted",
		"namespace":        "models",
		"createNamespaces": true,
		"maxReplicas":      0,
	}})
	o := parseArgs(t, deploymentOf(t, objects).Spec.Template.Spec.Containers[0].Args)
	if o.Pipeline.DefaultNamespace != "models" || !o.Pipeline.CreateNamespaces || o.Pipeline.MaxReplicas != 0 {
		t.Errorf("--pipeline-namespace %q, --pipeline-create-namespaces %v, --pipeline-max-replicas %d; want models, true, 0",
			o.Pipeline.DefaultNamespace, o.Pipeline.CreateNamespaces, o.Pipeline.MaxReplicas)
	}
	// The chart creates the Pipelines' namespace, and an uninstall keeps it
	// (users' workloads live there), unless it is the release's own.
	var created []string
	for _, obj := range objects {
		if obj.kind() == "Namespace" {
			created = append(created, obj.name())
			if obj.annotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("Namespace %s: annotations %v, want helm.sh/resource-policy: keep", obj.name(), obj.annotations())
			}
		}
	}
	if !slices.Equal(created, []string{"models"}) {
		t.Errorf("the chart creates Namespaces %v, want [models]", created)
	}
	for _, obj := range render(t, "models", map[string]any{"pipeline": map[string]any{"namespace": "models"}}) {
		if obj.kind() == "Namespace" {
			t.Errorf("released into the Pipelines' namespace, the chart creates Namespace %s too", obj.name())
		}
	}
	if want := []string{"nfs.example.com:/models", "10.0.0.5"}; !slices.Equal(o.Pipeline.AllowedNFS, want) {
		t.Errorf("--pipeline-allowed-nfs %v, want %v", o.Pipeline.AllowedNFS, want)
	}
	if want := []string{"registry.example.com/", "docker.io/library/nginx"}; !slices.Equal(o.Pipeline.AllowedImages, want) {
		t.Errorf("--pipeline-allowed-images %v, want %v", o.Pipeline.AllowedImages, want)
	}
	if o.Pipeline.PodSecurity != pipeline.PodSecurityRestricted {
		t.Errorf("--pipeline-pod-security %q, want restricted", o.Pipeline.PodSecurity)
	}
	// Unset, they are the manager's defaults.
	d := parseArgs(t, deploymentOf(t, render(t, "ndsl-system", nil)).Spec.Template.Spec.Containers[0].Args)
	if len(d.Pipeline.AllowedNFS)+len(d.Pipeline.AllowedImages) != 0 || d.Pipeline.PodSecurity != pipeline.DefaultOptions().PodSecurity ||
		d.Pipeline.DefaultNamespace != pipeline.DefaultOptions().DefaultNamespace || d.Pipeline.CreateNamespaces ||
		d.Pipeline.MaxReplicas != pipeline.DefaultOptions().MaxReplicas {
		t.Errorf("default values: pipeline options %+v, want the manager's defaults", d.Pipeline)
	}
}

// ingress.allowedHosts, ingress.defaultDomain and app.ingressDomain become
// --ingress-allowed-hosts, --ingress-default-domain and --app-ingress-domain;
// unset, no flag.
func TestChartIngressValuesAreFlags(t *testing.T) {
	objects := render(t, "ndsl-system", map[string]any{
		"ingress": map[string]any{
			"allowedHosts":  []any{"apps.example.com", "*.team.example.com"},
			"defaultDomain": "svc.apps.example.com",
		},
		"app": map[string]any{"ingressDomain": "apps.example.com"},
	})
	o := parseArgs(t, deploymentOf(t, objects).Spec.Template.Spec.Containers[0].Args)
	if want := []string{"apps.example.com", "*.team.example.com"}; !slices.Equal(o.Ingress.AllowedHosts, want) {
		t.Errorf("--ingress-allowed-hosts %v, want %v", o.Ingress.AllowedHosts, want)
	}
	if o.Ingress.DefaultDomain != "svc.apps.example.com" || o.App.IngressDomain != "apps.example.com" {
		t.Errorf("--ingress-default-domain %q, --app-ingress-domain %q; want svc.apps.example.com, apps.example.com",
			o.Ingress.DefaultDomain, o.App.IngressDomain)
	}
	d := parseArgs(t, deploymentOf(t, render(t, "ndsl-system", nil)).Spec.Template.Spec.Containers[0].Args)
	if len(d.Ingress.AllowedHosts) != 0 || d.Ingress.DefaultDomain != "" || d.App.IngressDomain != "" {
		t.Errorf("default values: --ingress-allowed-hosts %v, --ingress-default-domain %q, --app-ingress-domain %q; want none",
			d.Ingress.AllowedHosts, d.Ingress.DefaultDomain, d.App.IngressDomain)
	}
}

// The other knobs reach the Deployment.
func TestChartDeploymentValues(t *testing.T) {
	objects := render(t, "ndsl-system", map[string]any{
		"image":          map[string]any{"repository": "registry.example.com/ndsl/controller-manager", "tag": "v9.9.9", "pullPolicy": "Always"},
		"replicas":       3,
		"controllers":    []any{"*", "-ingress"},
		"extraArgs":      []any{"--concurrent-app-syncs=7"},
		"nodeSelector":   map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":    []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		"cleanup":        map[string]any{"enabled": true, "stalePeriod": "2h", "dryRun": true},
		"leaderElection": map[string]any{"leaseDuration": "20s"},
	})
	d := deploymentOf(t, objects)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "registry.example.com/ndsl/controller-manager:v9.9.9" || c.ImagePullPolicy != "Always" {
		t.Errorf("image %s (%s)", c.Image, c.ImagePullPolicy)
	}
	if *d.Spec.Replicas != 3 || pod.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Tolerations) != 1 {
		t.Errorf("replicas %d, nodeSelector %v, tolerations %v", *d.Spec.Replicas, pod.NodeSelector, pod.Tolerations)
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Error("the default anti-affinity is gone")
	}
	o := parseArgs(t, c.Args)
	if want := []string{"*", "-ingress", "cleanup"}; !slices.Equal(o.Generic.Controllers, want) {
		t.Errorf("--controllers %v, want %v", o.Generic.Controllers, want)
	}
	if o.App.Workers != 7 || o.Cleanup.StalePeriod.String() != "2h0m0s" || !o.Cleanup.DryRun || o.LeaderElection.LeaseDuration.Duration.String() != "20s" {
		t.Errorf("options %+v %+v %+v", o.App, o.Cleanup, o.LeaderElection)
	}
	// Without a Lease two replicas would both write.
	if _, err := renderText(t, "ndsl-system", map[string]any{"leaderElection": map[string]any{"enabled": false}}); err == nil {
		t.Error("two replicas without leader election rendered; want an error")
	}
	if _, err := renderText(t, "ndsl-system", map[string]any{"leaderElection": map[string]any{"enabled": false}, "replicas": 1}); err != nil {
		t.Errorf("one replica without leader election: %v", err)
	}
}

// The PodDisruptionBudget selects the manager's pods and lets one go at a time.
func TestChartPodDisruptionBudget(t *testing.T) {
	objects := render(t, "ndsl-system", nil)
	var pdb policyv1.PodDisruptionBudget
	one(t, objects, "PodDisruptionBudget", "controller-manager").into(t, &pdb)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(deploymentOf(t, objects).Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v does not select the manager's pods", pdb.Spec.Selector)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if len(ofKind(render(t, "ndsl-system", map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}), "PodDisruptionBudget")) != 0 {
		t.Error("podDisruptionBudget.enabled=false still renders one")
	}
}

// Issue 23: the CRDs are installed and kept on helm uninstall by default
// (deleting them deletes every App and Pipeline); crds.keep=false lets
// uninstall delete them, crds.install=false leaves them to the user.
// Issue 37: hook Jobs apply them and, on uninstall, release or delete them.
func TestChartCRDsKeptByDefault(t *testing.T) {
	onDelete := func(values map[string]any) (n int, step string) {
		out, err := renderText(t, "ndsl-system", values)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decode(t, out) {
			if o.kind() != "Job" || o.annotations()["helm.sh/hook"] != "pre-delete" {
				continue
			}
			var job batchv1.Job
			o.into(t, &job)
			step = strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
		}
		return len(ofKind(render(t, "ndsl-system", values), "CustomResourceDefinition")), step
	}
	names := "--crd=pipelines.distri-infer.ndsl.cn --crd=apps.ingress.example.com"
	if n, step := onDelete(nil); n != 2 || step != "crds release "+names {
		t.Errorf("default: %d CRDs, pre-delete %q; want 2 and crds release %s", n, step, names)
	}
	if n, step := onDelete(map[string]any{"crds": map[string]any{"keep": false}}); n != 2 || step != "crds delete "+names {
		t.Errorf("crds.keep=false: %d CRDs, pre-delete %q; want 2 and crds delete %s", n, step, names)
	}
	if n, step := onDelete(map[string]any{"crds": map[string]any{"install": false}}); n != 0 || step != "" {
		t.Errorf("crds.install=false: %d CRDs, pre-delete %q; want none", n, step)
	}
	// Without webhooks there is no conversion: v1 is not served.
	for _, crd := range crds(t, render(t, "ndsl-system", map[string]any{"webhooks": map[string]any{"enabled": false}})) {
		for _, v := range crd.Spec.Versions {
			if v.Served && !v.Storage {
				t.Errorf("webhooks.enabled=false: CRD %s serves %s without a conversion webhook", crd.Name, v.Name)
			}
		}
	}
}

// cert-manager mode: cert-manager issues the certificate, mounted where
// --webhook-cert-dir reads it, and cainjector fills in the caBundles; the
// manager gets no right to certificates or caBundles.
func TestChartCertManagerMode(t *testing.T) {
	objects := render(t, "ndsl-system", map[string]any{"webhooks": map[string]any{"certificates": "cert-manager"}})
	for _, o := range objects {
		if strings.HasPrefix(o.name(), "ndsl-controller-manager:webhook") {
			t.Errorf("%s: the manager keeps a right to certificates in cert-manager mode", o.key())
		}
	}
	d := deploymentOf(t, objects)
	o := parseArgs(t, d.Spec.Template.Spec.Containers[0].Args)
	mounted := false
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.MountPath == o.Webhook.CertDir && m.Name == "webhook-certs")
	}
	if o.Webhook.CertDir == "" || !mounted || d.Spec.Template.Spec.Volumes[0].Secret.SecretName != "controller-manager-webhook-tls" {
		t.Errorf("--webhook-cert-dir %q, mounts %v, volumes %v: want cert-manager's Secret mounted there", o.Webhook.CertDir,
			d.Spec.Template.Spec.Containers[0].VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
	cert := one(t, objects, "Certificate", "controller-manager-webhook")
	if cert["spec"].(map[string]any)["secretName"] != "controller-manager-webhook-tls" {
		t.Errorf("Certificate secretName %v", cert["spec"])
	}
	one(t, objects, "Issuer", "controller-manager-selfsigned")
	// An issuer of the user's: no Issuer of the chart's.
	objects = render(t, "ndsl-system", map[string]any{"webhooks": map[string]any{"certificates": "cert-manager",
		"certManager": map[string]any{"issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "corp-ca"}}}})
	if len(ofKind(objects, "Issuer")) != 0 {
		t.Error("an issuerRef is given, yet the chart renders an Issuer")
	}
	ref := one(t, objects, "Certificate", "controller-manager-webhook")["spec"].(map[string]any)["issuerRef"].(map[string]any)
	if ref["kind"] != "ClusterIssuer" || ref["name"] != "corp-ca" {
		t.Errorf("issuerRef %v, want ClusterIssuer corp-ca", ref)
	}
	if _, err := renderText(t, "ndsl-system", map[string]any{"webhooks": map[string]any{"certificates": "vault"}}); err == nil {
		t.Error("webhooks.certificates=vault rendered; want an error")
	}
}

// Issue 23: the ServiceMonitor works with a default kube-prometheus-stack:
// its release label, a token from a Secret (not the deprecated
// bearerTokenFile) of a ServiceAccount bound to the metrics-reader role,
// and the CA the manager publishes. The PrometheusRule carries the alerts.
func TestChartPrometheus(t *testing.T) {
	text, err := renderText(t, "ndsl-system", everything("self"))
	if err != nil {
		t.Fatal(err)
	}
	objects := decode(t, text)
	sm := one(t, objects, "ServiceMonitor", "controller-manager")
	if hasKey(map[string]any(sm), "bearerTokenFile") || hasKey(map[string]any(sm), "bearerTokenSecret") {
		t.Error("the ServiceMonitor uses the deprecated bearerTokenFile or bearerTokenSecret")
	}
	if sm.labels()["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v: want release=kube-prometheus-stack", sm.labels())
	}
	ep := sm["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	creds := ep["authorization"].(map[string]any)["credentials"].(map[string]any)
	secret := one(t, objects, "Secret", creds["name"].(string))
	sa := secret.annotations()["kubernetes.io/service-account.name"]
	if secret["type"] != "kubernetes.io/service-account-token" || creds["key"] != "token" || sa == nil {
		t.Errorf("the ServiceMonitor's credentials %v are not a ServiceAccount token Secret: %v", creds, secret)
	}
	bound := false
	for _, b := range ofKind(objects, "ClusterRoleBinding") {
		var crb rbacv1.ClusterRoleBinding
		b.into(t, &crb)
		for _, s := range crb.Subjects {
			bound = bound || (crb.RoleRef.Name == "ndsl-controller-manager:metrics-reader" && s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == "ndsl-system")
		}
	}
	if !bound {
		t.Errorf("no binding of ndsl-controller-manager:metrics-reader to the scraper %v", sa)
	}
	ca := ep["tlsConfig"].(map[string]any)["ca"].(map[string]any)["configMap"].(map[string]any)
	if ca["name"] != "controller-manager-ca" || ca["key"] != "ca-bundle.crt" {
		t.Errorf("ServiceMonitor CA %v, want the manager's ConfigMap controller-manager-ca", ca)
	}
	// The selector picks the metrics Service only (not the webhook one).
	sel := sm["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
	var matched []string
	for _, s := range ofKind(objects, "Service") {
		ok := true
		for k, v := range sel {
			ok = ok && s.labels()[k] == v
		}
		if ok {
			matched = append(matched, s.name())
		}
	}
	if !slices.Equal(matched, []string{"controller-manager-metrics"}) {
		t.Errorf("ServiceMonitor selects Services %v, want controller-manager-metrics", matched)
	}
	rule := one(t, objects, "PrometheusRule", "controller-manager")
	if rule.labels()["release"] != "kube-prometheus-stack" || len(rule["spec"].(map[string]any)["groups"].([]any)) == 0 {
		t.Errorf("PrometheusRule labels %v, spec %v", rule.labels(), rule["spec"])
	}
	// A Prometheus release of another name.
	objects = render(t, "ndsl-system", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "monitoring"}}}})
	if l := one(t, objects, "ServiceMonitor", "controller-manager").labels(); l["release"] != "monitoring" {
		t.Errorf("ServiceMonitor labels %v: want release=monitoring", l)
	}
}

// hasKey tells whether key is a field anywhere in v.
func hasKey(v any, key string) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == key || hasKey(e, key) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasKey(e, key) {
				return true
			}
		}
	}
	return false
}

func deploymentOf(t *testing.T, objects []object) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	one(t, objects, "Deployment", "controller-manager").into(t, &d)
	return &d
}

func subjects(t *testing.T, o object) []rbacv1.Subject {
	t.Helper()
	switch o.kind() {
	case "ClusterRoleBinding", "RoleBinding":
		var b rbacv1.RoleBinding
		o.into(t, &b)
		return b.Subjects
	}
	return nil
}

// webhooks are the admission webhooks, as the fields both kinds share.
func webhooks(t *testing.T, objects []object) []admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	var out []admissionregistrationv1.ValidatingWebhook
	for _, o := range objects {
		switch o.kind() {
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			o.into(t, &c)
			for _, h := range c.Webhooks {
				out = append(out, admissionregistrationv1.ValidatingWebhook{Name: h.Name, ClientConfig: h.ClientConfig, NamespaceSelector: h.NamespaceSelector, MatchConditions: h.MatchConditions, FailurePolicy: h.FailurePolicy})
			}
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			o.into(t, &c)
			out = append(out, c.Webhooks...)
		}
	}
	return out
}

func crds(t *testing.T, objects []object) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []apiextensionsv1.CustomResourceDefinition
	for _, o := range ofKind(objects, "CustomResourceDefinition") {
		var crd apiextensionsv1.CustomResourceDefinition
		o.into(t, &crd)
		out = append(out, crd)
	}
	if len(out) == 0 {
		t.Fatal("no CRDs rendered")
	}
	return out
}

// excludes tells whether selector leaves namespace out (and not default).
func excludes(selector *metav1.LabelSelector, namespace string) bool {
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || selector == nil {
		return false
	}
	return !s.Matches(labels.Set{"kubernetes.io/metadata.name": namespace}) && s.Matches(labels.Set{"kubernetes.io/metadata.name": "default"})
}
