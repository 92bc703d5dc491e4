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

package webhooks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	pipelinecontroller "github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/webhook"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The Pipelines of TestPipelinePoliciesAgreeWithWebhooks carry
// admittedByLabel: "pipeline-webhook-<config>" sends them to the Pipeline
// validator with that configuration's options, "pipeline-policy-<config>"
// to manifests/policies with that configuration's options. Every
// other Pipeline goes to the package's Pipeline webhook.
const (
	byPipelineWebhook = "pipeline-webhook-"
	byPipelinePolicy  = "pipeline-policy-"
)

// pipelineConfig is one set of the manager's Pipeline options: the
// webhook's Options and, from the same values, the policy's flags.
type pipelineConfig struct {
	name    string
	options pipelinecontroller.Options
}

// The namespaces of the agreement test, fixed so that the webhook server,
// which starts with the package, knows them.
const (
	paManager = "pa-manager" // the manager's namespace, the policy's param
	paDefault = "pa-pipeline"
	paTeamA   = "pa-team-a"
	paTeamB   = "pa-team-b"
)

var pipelineConfigs = []pipelineConfig{{
	name: "lists",
	options: pipelinecontroller.Options{
		DefaultNamespace: paDefault, AllowedNamespaces: []string{paTeamA}, ManagerNamespace: paManager, MaxReplicas: 10,
		AllowedNFS:    []string{"192.168.20.235:/home/aiedge", "NFS.Example.com", "[fd00::1]:/data/./models/", "10.0.0.9:/"},
		AllowedImages: []string{"docker.io/library/nginx", "registry.example.com/", "quay.io/team/", "localhost:5000"},
	},
}, {
	// "*" and no lists: every export and image but an image ID.
	name:    "star",
	options: pipelinecontroller.Options{DefaultNamespace: paDefault, AllowedNamespaces: []string{"*"}, ManagerNamespace: paManager},
}}

var (
	// notInPipelineAgreement keeps the package's Pipeline webhook off the
	// agreement test's Pipelines.
	notInPipelineAgreement = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: admittedByLabel, Operator: metav1.LabelSelectorOpNotIn, Values: pipelineAgreementLabels(),
	}}}
)

func pipelineAgreementLabels() []string {
	var values []string
	for _, c := range pipelineConfigs {
		values = append(values, byPipelineWebhook+c.name, byPipelinePolicy+c.name)
	}
	return values
}

func pathValidatePipelinesConfig(c pipelineConfig) string {
	return "/test-validate-pipelines-" + c.name
}

// registerPipelineAgreementWebhooks serves the Pipeline validator once per
// configuration, as the manager builds it: with the requester's rights
// checked and the stored Pipelines listed for overlaps.
func registerPipelineAgreementWebhooks(s *webhook.Server, access *webhook.AccessReviewer) {
	for _, c := range pipelineConfigs {
		s.HandleAdmission(pathValidatePipelinesConfig(c), "pipeline-validation-"+c.name, pipelinecontroller.Validator{
			Options: c.options, Access: access, ListPipelines: listPipelines,
		})
	}
}

func listPipelines(ctx context.Context) ([]pipelinev1beta1.Pipeline, error) {
	list, err := dyn.Resource(pipelinesV1beta1).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]pipelinev1beta1.Pipeline, len(list.Items))
	for i := range list.Items {
		if err := fromUnstructured(&list.Items[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pipelinePolicies turns the Pipeline policy of manifests/policies into
// the agreement test's: one validation policy per configuration, with its
// options written in as the chart writes them, bound to its labelled
// Pipelines with the manager's namespace as the param, and the warnings for
// all of them. The package's other Pipelines are left to its webhook.
func pipelinePolicies(p *controlplane.AdmissionPolicies) error {
	var policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	for _, o := range p.Validating {
		if o.Name != "ndsl-pipeline-validation" {
			policies = append(policies, o)
			continue
		}
		for _, c := range pipelineConfigs {
			copied := o.DeepCopy()
			copied.Name = o.Name + "-" + c.name
			if err := framework.SetPipelinePolicyFlags(copied, c.options); err != nil {
				return err
			}
			policies = append(policies, copied)
		}
	}
	p.Validating = policies
	var bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	var policyLabels []string
	for _, c := range pipelineConfigs {
		policyLabels = append(policyLabels, byPipelinePolicy+c.name)
	}
	for _, b := range p.ValidatingBindings {
		switch b.Spec.PolicyName {
		case "ndsl-pipeline-validation":
			for _, c := range pipelineConfigs {
				o := b.DeepCopy()
				o.Name = b.Name + "-" + c.name
				o.Spec.PolicyName = b.Spec.PolicyName + "-" + c.name
				o.Spec.ParamRef.Name = paManager
				o.Spec.MatchResources = &admissionregistrationv1.MatchResources{
					ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{admittedByLabel: byPipelinePolicy + c.name}},
				}
				bindings = append(bindings, o)
			}
		case "ndsl-pipeline-warnings":
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: admittedByLabel, Operator: metav1.LabelSelectorOpIn, Values: policyLabels,
			}}}}
			bindings = append(bindings, b)
		default:
			bindings = append(bindings, b)
		}
	}
	p.ValidatingBindings = bindings
	return nil
}

// installPipelineAgreement creates the agreement test's namespaces, the
// manager's among them; the policies are installed with the package's.
func installPipelineAgreement(ctx context.Context) error {
	for _, ns := range []string{paManager, paDefault, paTeamA, paTeamB} {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return nil
}

// A Pipeline admission request, made once through the webhook and once
// through manifests/policies, under each configuration.
type pipelineAdmission struct {
	name    string
	version string // v1beta1 (default) or v1
	// old is the spec an update or a delete starts from (created by the
	// admin through the package's webhook, then labelled); nil makes the
	// request a create.
	old            map[string]any
	oldAnnotations map[string]string
	// spec is the request's; nil with old makes it a delete.
	spec        map[string]any
	annotations map[string]string
	// user makes the request; "" is the cluster admin.
	user string
	// differs says why the policy's verdict may differ from the
	// webhook's; the test then requires that it does, so that the list
	// stays true.
	differs string
}

// Users of the agreement test. Each may write Pipelines (cluster-scoped).
var pipelineUsers = map[string][]rbacv1.PolicyRule{
	// What edit gives an author in their namespaces.
	"pa-author": {
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create"}},
	},
	"pa-no-claims": {
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create"}},
	},
	"pa-services-only": {
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create"}},
	},
	"pa-pipelines-only": nil,
}

// grantPipelineUsers binds the users to Pipelines cluster-wide and to their
// rules in team A's namespace and the default one.
func grantPipelineUsers(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "pa-pipelines"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"distri-infer.ndsl.cn"}, Resources: []string{"pipelines"}, Verbs: []string{"*"}}},
	}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for user, rules := range pipelineUsers {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if rules == nil {
			continue
		}
		for _, ns := range []string{paTeamA, paDefault} {
			grantUser(t, ns, user, rules)
		}
	}
}

const (
	sampleServer = "192.168.20.235"
	sampleShare  = "/home/aiedge/csiTest"
)

// pipelineSpec is a Pipeline spec of version with the given steps' images
// (one step per image), the NFS export and the target namespace ("" for
// none); set adds or replaces fields of spec.
func pipelineSpec(version, server, share, ns string, images ...string) map[string]any {
	var steps []any
	for i, image := range images {
		steps = append(steps, map[string]any{"model": fmt.Sprintf("m%d", i), "image": image})
	}
	spec := map[string]any{"steps": steps}
	if version == "v1" {
		spec["modelStorage"] = map[string]any{"nfs": map[string]any{"server": server, "path": share}}
	} else {
		spec["modelStorage"] = map[string]any{"type": "nfs", "csiParameter": map[string]any{"server": server, "share": share}}
	}
	if ns != "" {
		spec["namespace"] = ns
	}
	return spec
}

// with returns a copy of spec with step i's key set to value (i < 0 sets
// spec's own key).
func with(spec map[string]any, i int, key string, value any) map[string]any {
	out := deepCopyMap(spec)
	if i < 0 {
		out[key] = value
		return out
	}
	out["steps"].([]any)[i].(map[string]any)[key] = value
	return out
}

func deepCopyMap(m map[string]any) map[string]any {
	return runtimeDeepCopy(m).(map[string]any)
}

func runtimeDeepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = runtimeDeepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = runtimeDeepCopy(e)
		}
		return out
	}
	return v
}

// pipelineSampleSpecs are the specs of the design notes' sample
// (/work/shared/seed-samples, kept as manifests/samples/design-notes) and
// of manifests/samples, by version.
func pipelineSampleSpecs(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, rel := range []string{"design-notes/pipeline-v1beta1.yaml", "pipeline-v1beta1.yaml", "pipeline-v1.yaml"} {
		data, err := os.ReadFile(sample(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		out[filepath.ToSlash(rel)] = obj["spec"].(map[string]any)
	}
	return out
}

func pipelineAdmissions(t *testing.T) []pipelineAdmission {
	hex := func(n int) string { return strings.Repeat("0123456789abcdef", 8)[:n] }
	b := func(ns string, images ...string) map[string]any {
		return pipelineSpec("v1beta1", sampleServer, sampleShare, ns, images...)
	}
	v1 := func(ns string, images ...string) map[string]any {
		return pipelineSpec("v1", sampleServer, sampleShare, ns, images...)
	}
	export := func(version, server, share string) map[string]any {
		return pipelineSpec(version, server, share, paTeamA, "nginx:1.27")
	}
	samples := pipelineSampleSpecs(t)
	cases := []pipelineAdmission{
		{name: "the design notes' sample", spec: samples["design-notes/pipeline-v1beta1.yaml"]},
		{name: "manifests/samples v1beta1", spec: samples["pipeline-v1beta1.yaml"]},
		{name: "manifests/samples v1", version: "v1", spec: samples["pipeline-v1.yaml"]},
		{name: "the design notes' sample by an author", user: "pa-author", spec: samples["design-notes/pipeline-v1beta1.yaml"]},
		{name: "extra csiParameter keys", spec: with(b(paTeamA, "nginx:1.27"), -1, "modelStorage", map[string]any{"csiParameter": map[string]any{
			"server": sampleServer, "share": sampleShare, "type": "nfs", "mountPermissions": "0", "a": "b", "Z<&>": "1"}})},
		{name: "a stray spec.status of every scalar", spec: with(b(paTeamA, "nginx:1.27"), -1, "status", map[string]any{
			"phase": "failed", "n": int64(3), "ok": true, "none": nil, "q": `a"b\c<d>&`})},
		{name: "a stray spec.status with a list", spec: with(b(paTeamA, "nginx:1.27"), -1, "status", map[string]any{"l": []any{"x"}}),
			differs: "CEL cannot write JSON: the policy's warning shows spec.status only when it maps keys to strings, numbers, booleans or nulls"},

		// The NFS export.
		{name: "export allowed below the prefix", spec: export("v1beta1", sampleServer, "/home/aiedge/x/y")},
		{name: "export, the prefix itself", spec: export("v1beta1", sampleServer, "/home/aiedge")},
		{name: "export, cleaned into the prefix", spec: export("v1beta1", sampleServer, "/home//aiedge/./x/")},
		{name: "export beside the prefix", spec: export("v1beta1", sampleServer, "/home/aiedge-evil")},
		{name: "export escaping with ..", spec: export("v1beta1", sampleServer, "/home/aiedge/../../etc")},
		{name: "export of another server", spec: export("v1beta1", "10.0.0.66", "/home/aiedge")},
		{name: "export, a relative share", spec: export("v1beta1", sampleServer, "home/aiedge/x")},
		{name: "export, a server listed in another case", spec: export("v1beta1", "nfs.example.COM", "/anything")},
		{name: "export, a server listed with the long s", spec: export("v1beta1", "nfſ.example.com", "/anything")},
		{name: "export, IPv6 without brackets", spec: export("v1beta1", "fd00::1", "/data/models/a")},
		{name: "export, IPv6 beside the prefix", spec: export("v1beta1", "[fd00::1]", "/data/model")},
		{name: "export, a server whose every share is allowed", spec: export("v1beta1", "10.0.0.9", "/")},
		{name: "v1 export of another server", version: "v1", spec: export("v1", "10.0.0.66", "/home/aiedge")},
		{name: "v1 export beside the prefix", version: "v1", spec: export("v1", sampleServer, "/home/aiedge-evil")},
		{name: "update keeping a forbidden export", old: export("v1beta1", "10.0.0.66", "/x"),
			spec: with(export("v1beta1", "10.0.0.66", "/x"), 0, "replicas", int64(2))},
		{name: "update to another forbidden export", old: export("v1beta1", "10.0.0.66", "/x"), spec: export("v1beta1", "10.0.0.66", "/y")},
		{name: "v1 update keeping a forbidden export", version: "v1", old: export("v1", "10.0.0.66", "/x"),
			spec: with(export("v1", "10.0.0.66", "/x"), 0, "replicas", int64(2))},

		// Images.
		{name: "image ID", spec: b(paTeamA, hex(64))},
		{name: "bare digest", spec: b(paTeamA, "sha256:"+hex(64))},
		{name: "bare sha512 digest", spec: b(paTeamA, "sha512:"+hex(128))},
		{name: "digest of an unknown algorithm", spec: b(paTeamA, "md5:"+hex(32))},
		{name: "named with a digest", spec: b(paTeamA, "nginx@sha256:"+hex(64))},
		{name: "neighbour repository", spec: b(paTeamA, "nginx:1", "nginx-evil")},
		{name: "registry prefix", spec: b(paTeamA, "registry.example.com/a/b:1", "registry.example.com:5000/a")},
		{name: "organisation prefix", spec: b(paTeamA, "quay.io/team/m@sha256:"+hex(64), "quay.io/teams/m", "quay.io/team")},
		{name: "registry with a port", spec: b(paTeamA, "localhost:5000/a:1", "localhost:50000/a", "localhost/a")},
		{name: "not a reference", spec: b(paTeamA, "Nginx", "nginx::1", `a"b\c`, "nginx@sha256:"+hex(63), "nginx@md5:"+hex(32))},
		{name: "Docker Hub spellings", spec: b(paTeamA, "library/nginx", "docker.io/nginx", "index.docker.io/nginx:1", "docker.io/library/nginx@sha256:"+hex(64))},
		{name: "v1 neighbour image", version: "v1", spec: v1(paTeamA, "docker.io/library/nginx-evil:1")},
		{name: "update keeping a forbidden image in another step", old: b(paTeamA, "evil"), spec: b(paTeamA, "nginx", "evil")},
		{name: "update to a forbidden image", old: b(paTeamA, "nginx"), spec: b(paTeamA, "evil")},

		// Namespaces.
		{name: "the default namespace", spec: b("", "nginx")},
		{name: "a listed namespace", spec: b(paTeamA, "nginx")},
		{name: "an unlisted namespace", spec: b(paTeamB, "nginx")},
		{name: "kube-system", spec: b("kube-system", "nginx")},
		{name: "the manager's namespace", spec: b(paManager, "nginx")},
		{name: "update keeping an unlisted namespace", old: b(paTeamB, "nginx"), spec: with(b(paTeamB, "nginx"), 0, "replicas", int64(1))},
		{name: "update into an unlisted namespace", old: b(paTeamA, "nginx"), spec: b(paTeamB, "nginx")},
		{name: "v1 into kube-system", version: "v1", spec: v1("kube-system", "nginx")},

		// Replicas.
		{name: "replicas at the bound", spec: with(b(paTeamA, "nginx"), 0, "replicas", int64(10))},
		{name: "replicas over the bound", spec: with(with(b(paTeamA, "nginx", "nginx"), 0, "replicas", int64(11)), 1, "replicas", int64(100000))},
		{name: "update lowering replicas still over", old: with(b(paTeamA, "nginx"), 0, "replicas", int64(50)),
			spec: with(b(paTeamA, "nginx"), 0, "replicas", int64(20))},
		{name: "update raising replicas over", old: with(b(paTeamA, "nginx"), 0, "replicas", int64(5)),
			spec: with(b(paTeamA, "nginx"), 0, "replicas", int64(20))},

		// The most steps the schema allows: the CEL cost of 64 images read,
		// and of 64 refusals (whose message is longer than the 5 KiB a
		// policy's message may be).
		{name: "64 steps", spec: b(paTeamA, manySteps("registry.example.com/team/model-%d:v1")...)},
		{name: "64 steps, a long image each", spec: b(paTeamA, manySteps("registry.example.com/"+strings.Repeat("a", 200)+"/m-%d:v1")...)},
		{name: "64 steps refused", spec: b(paTeamA, manySteps("quay.io/other/model-%d:v1")...),
			differs: "a policy's message is cut off at 5 KiB: past it the API server gives the validation's static message, which names the fields"},

		// Everything at once.
		{name: "every allowlist refuses", spec: with(pipelineSpec("v1beta1", "10.0.0.66", "/x", paTeamB, "evil", hex(64)), 0, "replicas", int64(11))},

		// The requester's rights.
		{name: "an author in their namespace", user: "pa-author", spec: b(paTeamA, "nginx")},
		{name: "an author in the default namespace", user: "pa-author", spec: b("", "nginx")},
		{name: "an author in another team's namespace", user: "pa-author", spec: b(paTeamB, "nginx")},
		{name: "no rights for the claim", user: "pa-no-claims", spec: b(paTeamA, "nginx")},
		{name: "only services", user: "pa-services-only", spec: b(paTeamA, "nginx")},
		{name: "no rights at all, and bad images", user: "pa-pipelines-only", spec: b(paTeamB, "evil", hex(64))},
		{name: "re-image another team's Pipeline", user: "pa-author", old: b(paTeamB, "nginx"), spec: b(paTeamB, "nginx:1")},
		{name: "relabel another team's Pipeline", user: "pa-author", old: b(paTeamB, "nginx"), spec: b(paTeamB, "nginx"),
			annotations: map[string]string{"team": "a"}},
		{name: "move another team's Pipeline to the author's namespace", user: "pa-author", old: b(paTeamB, "nginx"), spec: b(paTeamA, "nginx")},
		{name: "move from the author's namespace by a user without claims", user: "pa-no-claims", old: b(paTeamA, "nginx"), spec: b(paTeamB, "nginx")},
		{name: "move by a user with services only", user: "pa-services-only", old: b(paDefault, "nginx"), spec: b(paTeamA, "nginx")},
		{name: "move between the author's namespaces", user: "pa-author", old: b("", "nginx"), spec: b(paTeamA, "nginx")},
		{name: "v1 by an author elsewhere", version: "v1", user: "pa-author", spec: v1(paTeamB, "nginx")},
		{name: "v1 move by a user without rights", version: "v1", user: "pa-pipelines-only", old: v1(paTeamA, "nginx"), spec: v1(paTeamB, "nginx")},
		{name: "delete by an author", user: "pa-author", old: b(paTeamA, "nginx")},
		{name: "delete of another team's Pipeline", user: "pa-author", old: b(paTeamB, "nginx")},
		{name: "v1 delete by a user without rights", version: "v1", user: "pa-no-claims", old: v1(paTeamA, "nginx")},
		{name: "delete by the admin", old: b(paTeamB, "nginx")},

		// The conversion's annotations.
		{name: "reserved annotation", spec: b(paTeamA, "nginx"), annotations: map[string]string{"conversion.distri-infer.ndsl.cn/v1beta1-spec": "{}"}},
		{name: "reserved annotations, an author elsewhere", user: "pa-author", spec: b(paTeamB, "nginx"), annotations: map[string]string{
			"conversion.distri-infer.ndsl.cn/v1beta1-spec": "{}", "conversion.distri-infer.ndsl.cn/v1beta1-status": "{}"}},
		{name: "reserved annotation added on update", old: b(paTeamA, "nginx"),
			spec: b(paTeamA, "nginx"), annotations: map[string]string{"conversion.distri-infer.ndsl.cn/v1beta1-status": `{"phase":"x"}`}},
		{name: "v1 with the conversion's annotation", version: "v1", spec: v1(paTeamA, "nginx"),
			annotations: map[string]string{"conversion.distri-infer.ndsl.cn/v1beta1-spec": "{}"}},

		// What only the webhook checks.
		{name: "a directory inside another Pipeline's", spec: pipelineSpec("v1beta1", sampleServer, "/home/aiedge/pa-overlap/outer", paTeamA, "nginx"),
			differs: "the webhook lists the stored Pipelines to refuse an overlapping directory; a policy cannot list objects " +
				"(the webhook stays called beside the policies, failing open, for this check)"},
	}
	return cases
}

// manySteps is 64 images, format with each step's index.
func manySteps(format string) []string {
	images := make([]string, 64)
	for i := range images {
		images[i] = fmt.Sprintf(format, i)
	}
	return images
}

// pipelineOutcome is what a client sees of a Pipeline admission.
type pipelineOutcome struct {
	Code     int32
	Message  string
	Warnings []string
}

// TestPipelinePoliciesAgreeWithWebhooks: for every request of the corpus,
// under each configuration of the allowlists, the Pipeline policies of
// manifests/policies give the webhook's verdict, status code, reasons and
// warnings, at v1beta1 and v1. The differences a policy cannot avoid are
// normalised (who denied, the paths of v1's fields) or named in the case
// (differs).
func TestPipelinePoliciesAgreeWithWebhooks(t *testing.T) {
	setup(t)
	grantPipelineUsers(t)
	ctx := context.Background()
	for _, c := range pipelineConfigs {
		installPipelineConfigWebhook(t, c)
	}
	// The stored Pipeline whose directory, /home/aiedge/pa-overlap/outer,
	// the overlap case's lies inside of.
	outer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "distri-infer.ndsl.cn/v1beta1", "kind": "Pipeline",
		"metadata": map[string]any{"name": "outer"},
		"spec":     pipelineSpec("v1beta1", sampleServer, "/home/aiedge/pa-overlap", paTeamA, "nginx"),
	}}
	if _, err := dyn.Resource(pipelinesV1beta1).Create(ctx, outer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), "outer", metav1.DeleteOptions{})
	})

	for _, config := range pipelineConfigs {
		for i, c := range pipelineAdmissions(t) {
			if c.version == "" {
				c.version = "v1beta1"
			}
			got := map[string]pipelineOutcome{}
			for _, by := range []string{byPipelineWebhook, byPipelinePolicy} {
				name := fmt.Sprintf("pa-%s-%s-%d", strings.TrimSuffix(by, "-")[len("pipeline-"):], config.name, i)
				out, err := admitPipeline(ctx, c, by+config.name, name)
				if err != nil {
					t.Fatalf("%s, %s (%s): %v", config.name, c.name, by, err)
				}
				got[by] = normalizePipeline(out, name, c.version, by)
			}
			webhookOut, policyOut := got[byPipelineWebhook], got[byPipelinePolicy]
			same := equalJSON(webhookOut, policyOut)
			switch {
			case c.differs != "" && same && webhookOut.Code != 200:
				t.Errorf("%s, %s: the policies agree with the webhook; the case says they differ (%s)\nboth: %+v", config.name, c.name, c.differs, webhookOut)
			case c.differs != "":
				t.Logf("%s, %s: known difference (%s)\nwebhook: %+v\npolicies: %+v", config.name, c.name, c.differs, webhookOut, policyOut)
			case !same:
				t.Errorf("%s, %s: the policies differ from the webhook\nwebhook:  %+v\npolicies: %+v", config.name, c.name, webhookOut, policyOut)
			}
		}
	}
}

// installPipelineConfigWebhook points a validating webhook for c's
// labelled Pipelines at c's validator, as manifests/webhook configures the
// Pipeline webhook, and waits until both it and c's policy binding act.
func installPipelineConfigWebhook(t *testing.T, c pipelineConfig) {
	t.Helper()
	ctx := context.Background()
	name := "ndsl-webhooks-test-pipelines-" + c.name
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "validate.pipelines.distri-infer.ndsl.cn",
			ClientConfig: clientConfig(webhookURL, pathValidatePipelinesConfig(c), webhookCA),
			Rules: rule("distri-infer.ndsl.cn", "pipelines",
				admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{admittedByLabel: byPipelineWebhook + c.name}},
			MatchPolicy:             ptr.To(admissionregistrationv1.Exact),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	client := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := client.Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// An image ID is refused under every configuration.
	for _, by := range []string{byPipelineWebhook, byPipelinePolicy} {
		probe := labelledPipeline("v1beta1", "pa-probe", by+c.name, pipelineSpec("v1beta1", sampleServer, sampleShare, paTeamA, strings.Repeat("ab", 32)), nil)
		var last error
		err := pollUntil(ctx, func(ctx context.Context) (bool, error) {
			_, last = dyn.Resource(pipelinesV1beta1).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			want := "admission webhook"
			if by == byPipelinePolicy {
				want = "ValidatingAdmissionPolicy 'ndsl-pipeline-validation-" + c.name + "'"
			}
			return last != nil && strings.Contains(last.Error(), "names no repository") && strings.Contains(last.Error(), want), nil
		})
		if err != nil {
			t.Fatalf("waiting for the %s%s path to refuse an image ID (last: %v): %v", by, c.name, last, err)
		}
	}
}

func labelledPipeline(version, name, admittedBy string, spec map[string]any, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "distri-infer.ndsl.cn/" + version, "kind": "Pipeline",
		"metadata": map[string]any{"name": name},
		"spec":     runtimeDeepCopy(spec),
	}}
	if admittedBy != "" {
		u.SetLabels(map[string]string{admittedByLabel: admittedBy})
	}
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

// admitPipeline makes the request of c, labelled admittedBy, as c.user,
// with dryRun. An update or a delete starts from c.old, created by the
// admin through the package's webhook and then labelled (a metadata-only
// update every path admits), so that what it keeps may be what the
// allowlists now refuse.
func admitPipeline(ctx context.Context, c pipelineAdmission, admittedBy, name string) (pipelineOutcome, error) {
	gvr := pipelinesV1beta1
	if c.version == "v1" {
		gvr = pipelinesV1
	}
	client, warnings, err := clientAs(c.user)
	if err != nil {
		return pipelineOutcome{}, err
	}
	dry := []string{metav1.DryRunAll}
	var obj *unstructured.Unstructured
	if c.spec != nil {
		obj = labelledPipeline(c.version, name, admittedBy, c.spec, c.annotations)
	}
	switch {
	case c.old == nil:
		_, err = client.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{DryRun: dry, FieldValidation: "Strict"})
	default:
		old, createErr := dyn.Resource(gvr).Create(ctx, labelledPipeline(c.version, name, "", c.old, c.oldAnnotations), metav1.CreateOptions{})
		if createErr != nil {
			return pipelineOutcome{}, fmt.Errorf("creating the Pipeline to update: %w", createErr)
		}
		defer dyn.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{}) //nolint:errcheck
		old.SetLabels(map[string]string{admittedByLabel: admittedBy})
		if old, err = dyn.Resource(gvr).Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return pipelineOutcome{}, fmt.Errorf("labelling the Pipeline to update: %w", err)
		}
		warnings.take()
		if obj == nil {
			err = client.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{DryRun: dry})
			break
		}
		obj.SetResourceVersion(old.GetResourceVersion())
		annotations := old.GetAnnotations()
		if c.annotations != nil {
			annotations = c.annotations
		}
		obj.SetAnnotations(annotations)
		_, err = client.Resource(gvr).Update(ctx, obj, metav1.UpdateOptions{DryRun: dry, FieldValidation: "Strict"})
	}
	out := pipelineOutcome{Code: 200, Warnings: warnings.take()}
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		out.Code, out.Message = status.Status().Code, status.Status().Message
	case err != nil:
		return out, err
	}
	return out, nil
}

var v1beta1StoragePath = strings.NewReplacer(
	"spec.modelStorage.csiParameter[server]", "spec.modelStorage.nfs.server",
	"spec.modelStorage.csiParameter[share]", "spec.modelStorage.nfs.path")

// normalizePipeline takes out of an outcome what names the path rather
// than the decision: who denied or warned, the Pipeline's name, and
// through v1 the webhook's v1beta1 field paths.
func normalizePipeline(out pipelineOutcome, name, version, by string) pipelineOutcome {
	out.Message = deniedBy.ReplaceAllString(out.Message, "")
	out.Message = strings.ReplaceAll(out.Message, `"`+name+`"`, `"NAME"`)
	out.Message = strings.ReplaceAll(out.Message, "/"+name+" ", "/NAME ")
	if by == byPipelineWebhook && version == "v1" {
		// The webhook reads a v1 Pipeline converted to v1beta1 and names
		// v1beta1's fields; the policy names the v1 fields the user wrote.
		out.Message = v1beta1StoragePath.Replace(out.Message)
	}
	var warnings []string
	for _, w := range out.Warnings {
		warnings = append(warnings, warnedBy.ReplaceAllString(w, ""))
	}
	slices.Sort(warnings)
	out.Warnings = warnings
	return out
}
