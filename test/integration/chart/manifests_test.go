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
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
)

// The chart renders what manifests/ builds: the same objects, with the same
// rules, webhooks, CRDs, probes and (parsed) flags, in ndsl-system. Helm's
// own labels and annotations are extra; the manager's Namespace object is
// helm's (--create-namespace), not the chart's.
func TestChartMatchesManifests(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kustomize func(t *testing.T) []object
		values    map[string]any
	}{
		{"default", func(t *testing.T) []object { return kustomize(t, repoRoot(t)+"/manifests/default") }, nil},
		{"cleanup", func(t *testing.T) []object { return kustomizeWith(t, "cleanup") }, map[string]any{"cleanup": map[string]any{"enabled": true}}},
		// A controller off by default turned on by naming it, as any
		// controller can be without values of its own: its RBAC comes too.
		{"cleanup named in controllers", func(t *testing.T) []object { return kustomizeWith(t, "cleanup") },
			map[string]any{"controllers": []any{"*", "cleanup"}}},
		{"cert-manager", func(t *testing.T) []object { return kustomizeWith(t, "cert-manager") },
			map[string]any{"webhooks": map[string]any{"certificates": "cert-manager"}}},
		// Only the kustomize component scrapes as the chart does (the old
		// overlay used bearerTokenFile).
		{"prometheus", func(t *testing.T) []object { return kustomizeComponent(t, "prometheus") },
			map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The chart creates the Pipelines' default namespace, as
			// manifests/pipeline-namespace does beside manifests/default.
			// The Deployment's Pipeline flags come from a generated
			// ConfigMap there, rendered from values here.
			want := byKey(clusterScopedUnnamespaced(resolvePipelineOptions(t,
				append(tc.kustomize(t), kustomize(t, repoRoot(t)+"/manifests/pipeline-namespace")...))))
			got := byKey(render(t, "ndsl-system", tc.values))
			for key, w := range want {
				if w.kind() == "Namespace" && w.name() != "pipeline" {
					continue
				}
				g, ok := got[key]
				if !ok {
					t.Errorf("%s: in the kustomize build, not in the chart", key)
					continue
				}
				compareObjects(t, w, g)
			}
			for key, g := range got {
				if g.annotations()["helm.sh/hook"] == "test" {
					continue // helm test's, the chart's alone
				}
				if _, ok := want[key]; !ok {
					t.Errorf("%s: in the chart, not in the kustomize build", key)
				}
			}
		})
	}
}

// clusterScopedUnnamespaced drops the namespace kustomize sets on the
// admission policies: its built-in schema does not know them, so it takes
// them for namespaced. The API server clears it (they are cluster-scoped),
// and kubectl sends them to the cluster-scoped path.
func clusterScopedUnnamespaced(objects []object) []object {
	for _, o := range objects {
		if strings.HasSuffix(o.kind(), "AdmissionPolicy") || strings.HasSuffix(o.kind(), "AdmissionPolicyBinding") {
			delete(o.meta(), "namespace")
		}
	}
	return objects
}

// compareObjects fails unless got is want plus labels and annotations, and,
// for the Deployment, flags that parse to the same options.
func compareObjects(t *testing.T, want, got object) {
	t.Helper()
	for _, m := range []struct {
		what      string
		want, got map[string]any
	}{{"labels", want.labels(), got.labels()}, {"annotations", want.annotations(), got.annotations()}} {
		for k, v := range m.want {
			if m.got[k] != v {
				t.Errorf("%s: %s %s=%v, want %v", want.key(), m.what, k, m.got[k], v)
			}
		}
	}
	w, g := stripped(t, want), stripped(t, got)
	switch want.kind() {
	case "Deployment":
		wantArgs, gotArgs := takeArgs(t, w), takeArgs(t, g)
		wo, gotOpts := parseArgs(t, wantArgs), parseArgs(t, gotArgs)
		if gotOpts.Webhook.CertDir != "" {
			// cert-manager's certificate also serves /metrics (the chart's
			// Certificate names the metrics Service), so Prometheus verifies
			// it; the old kustomize overlay did not.
			if gotOpts.Generic.TLSCertFile != gotOpts.Webhook.CertDir+"/tls.crt" || gotOpts.Generic.TLSKeyFile != gotOpts.Webhook.CertDir+"/tls.key" {
				t.Errorf("cert-manager: --tls-cert-file %q, --tls-private-key-file %q: want cert-manager's certificate in %s",
					gotOpts.Generic.TLSCertFile, gotOpts.Generic.TLSKeyFile, gotOpts.Webhook.CertDir)
			}
			if wo.Generic.TLSCertFile == "" {
				gotOpts.Generic.TLSCertFile, gotOpts.Generic.TLSKeyFile = "", ""
			}
		}
		if !reflect.DeepEqual(wo, gotOpts) {
			t.Errorf("Deployment args %q parse to other options than the manifests' %q:\n%s", gotArgs, wantArgs, diff.Diff(wo, gotOpts))
		}
		// The image is the values' (image.repository, image.tag).
		for _, o := range []object{w, g} {
			c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			delete(c, "image")
			delete(c, "imagePullPolicy")
		}
	case "Certificate":
		// The chart's names the metrics Service too (see above).
		wn, gn := dnsNames(w), dnsNames(g)
		for _, n := range wn {
			if !slices.Contains(gn, n) {
				t.Errorf("Certificate: dnsNames %v lack %s", gn, n)
			}
		}
		g["spec"].(map[string]any)["dnsNames"] = w["spec"].(map[string]any)["dnsNames"]
	}
	if !reflect.DeepEqual(w, g) {
		t.Errorf("%s differs from the kustomize build (- manifests, + chart):\n%s", want.key(), diff.Diff(w, g))
	}
}

// stripped is a deep copy without labels and annotations.
func stripped(t *testing.T, o object) object {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var c object
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	delete(c.meta(), "labels")
	delete(c.meta(), "annotations")
	return c
}

func takeArgs(t *testing.T, o object) []string {
	t.Helper()
	var d appsv1.Deployment
	o.into(t, &d)
	c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	delete(c, "args")
	return d.Spec.Template.Spec.Containers[0].Args
}

// parseArgs parses the manager's flags as the manager does.
func parseArgs(t *testing.T, args []string) *options.Options {
	t.Helper()
	o := options.NewOptions()
	flags := app.NewRegistry().Flags(o)
	set := flags.FlagSet("all")
	options.AddAll(set, flags)
	if err := set.Parse(args); err != nil {
		t.Fatalf("args %q do not parse: %v", args, err)
	}
	return o
}

func dnsNames(o object) []string {
	var out []string
	list, _ := o["spec"].(map[string]any)["dnsNames"].([]any)
	for _, n := range list {
		out = append(out, n.(string))
	}
	return out
}

// The dashboard ConfigMap holds the manifests' dashboard.
func TestChartDashboardIsTheManifests(t *testing.T) {
	want := one(t, kustomizeWith(t, "grafana"), "ConfigMap", "controller-manager-dashboard")
	got := one(t, render(t, "ndsl-system", map[string]any{"metrics": map[string]any{"dashboard": map[string]any{"enabled": true}}}),
		"ConfigMap", "controller-manager-dashboard")
	wd, gd := want["data"].(map[string]any), got["data"].(map[string]any)
	for k, v := range wd {
		if strings.TrimSpace(gd[k].(string)) != strings.TrimSpace(v.(string)) {
			t.Errorf("dashboard ConfigMap key %s differs from the manifests'", k)
		}
	}
	if len(gd) != len(wd) {
		t.Errorf("dashboard ConfigMap keys %v, want those of the manifests' %v", gd, wd)
	}
	if got.labels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard labels %v: want grafana_dashboard=1 for Grafana's sidecar", got.labels())
	}
}
