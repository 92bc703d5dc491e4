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
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
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

func convert(t *testing.T, doc map[string]any, into any) {
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
	for _, dir := range []string{"crd", "rbac", "manager", "default", "overlays/prometheus", "overlays/grafana"} {
		build(t, dir)
	}
}

func TestRBACHasNoWildcards(t *testing.T) {
	for _, doc := range build(t, "default") {
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

func TestDeploymentIsHardenedAndHighlyAvailable(t *testing.T) {
	var d *appsv1.Deployment
	for _, doc := range build(t, "default") {
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
	flags := fs.Flags(nil, nil)
	set := flags.FlagSet("all")
	options.AddAll(set, flags)
	if err := set.Parse(c.Args); err != nil {
		t.Errorf("the Deployment's args do not parse: %v", err)
	}
}

// metricName finds the metric names a PromQL expression uses.
var metricName = regexp.MustCompile(`\b([a-z_]+_(?:total|seconds_bucket|depth|workers|status|bytes))\b`)

func TestDashboardQueriesExportedMetrics(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "overlays", "grafana", "dashboard.json"))
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
	var body string
	framework.Eventually(t, 30*time.Second, "reconcile metrics", func(context.Context) (bool, error) {
		var err error
		_, body, err = m.Get("/metrics")
		return strings.Contains(body, "controller_manager_reconcile_total{") &&
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
}
