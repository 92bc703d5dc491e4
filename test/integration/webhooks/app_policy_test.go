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
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// An App admission request, made once through the webhooks and once
// through manifests/policies.
type appAdmission struct {
	name    string
	version string // v1beta1 or v1
	// old is the spec an update starts from (created by the admin through
	// the same path); nil makes the request a create.
	old            map[string]any
	oldAnnotations map[string]string
	spec           map[string]any
	annotations    map[string]string
	// user makes the request; "" is the cluster admin.
	user string
	// unsaidByPolicy starts a warning the webhooks give and the policies
	// cannot: the request is refused by the CRD's schema after mutation and
	// before validating admission, where the policy that warns runs.
	unsaidByPolicy string
}

// admissionOutcome is what a client sees of an admission: the verdict, the
// reasons, the warnings, and what would be stored.
type admissionOutcome struct {
	Code      int32
	Message   string
	Warnings  []string
	Spec      map[string]any
	Requested string // the inversion's annotation, "" when absent
}

// Users with some of the rights an App's children need, in both namespaces.
var appUsers = map[string][]rbacv1.PolicyRule{
	"apps-only": {appRule},
	"no-ingress": {appRule,
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create"}}},
}

var appRule = rbacv1.PolicyRule{APIGroups: []string{"ingress.example.com"}, Resources: []string{"apps"}, Verbs: []string{"*"}}

func appImages() []string {
	hex := func(n int) string { return strings.Repeat("0123456789abcdef", 8)[:n] }
	return []string{
		"nginx", "nginx:latest", "nginx:1.25", "library/nginx:1.25", "docker.io/nginx", "docker.io/library/nginx:1",
		"index.docker.io/nginx:1", "localhost/app:1", "localhost:5000/app", "registry.example.com:5000/team/app:v1.2.3",
		"[::1]:5000/app:1", "127.0.0.1:5000/app:1", "foo.com:bar/app",
		"Nginx", "nginx/Foo:1", "example.com/Team/app:1", "Example.com/team/app:1", "UPPER/app:1", "a.b_c/app:1", "a_b/app",
		"localhost:5000/App", "NGINX@sha256:" + hex(64),
		hex(64), hex(64) + ":1",
		"nginx@sha256:" + hex(64), "nginx:1@sha256:" + hex(64), "nginx@sha256:" + hex(63), "nginx@sha256:" + strings.ToUpper(hex(64)),
		"nginx@sha512:" + hex(128), "nginx@sha384:" + hex(96), "nginx@md5:" + hex(32), "nginx@sha256+b64:" + hex(32), "nginx@Sha256:" + hex(64),
		"nginx::1", "nginx:", ":1", "-nginx", "nginx-", "foo__bar", "foo___bar", "foo..bar", "foo--bar", "foo bar", `a"b`, `a\b`,
		"ns//app", "app/", strings.Repeat("a", 250) + "/b", strings.Repeat("a", 248), strings.Repeat("a", 256),
		"example.com/" + strings.Repeat("a", 255), "example.com/" + strings.Repeat("a", 256),
		"nginx:" + strings.Repeat("t", 128), "nginx:" + strings.Repeat("t", 129), "nginx:-1", "nginx:.1", "nginx:_1",
	}
}

func appAdmissions() []appAdmission {
	svc := func(kv ...any) map[string]any {
		m := map[string]any{"image": "nginx:1.25", "enable_service": true}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	v1 := func(exposure string) map[string]any {
		return map[string]any{"image": "nginx:1.25", "exposure": exposure}
	}
	cases := []appAdmission{
		{name: "inverted on create", spec: svc()},
		{name: "inverted back on create", spec: svc("enable_ingress", true)},
		{name: "the design notes' webhook case", spec: map[string]any{"image": "nginx", "enable_service": false, "enable_ingress": false},
			unsaidByPolicy: "spec.enable_ingress was set to true, the inverse of the false requested"},
		{name: "decided already", spec: svc("enable_ingress", false), annotations: map[string]string{requestedAnnotation: "false"}},
		{name: "decided already, true", spec: svc("enable_ingress", true), annotations: map[string]string{requestedAnnotation: "true"}},
		{name: "decided already, garbage", spec: svc(), annotations: map[string]string{requestedAnnotation: "maybe"}},
		{name: "re-applied", old: svc(), spec: svc("enable_ingress", false)},
		{name: "re-applied, true", old: svc("enable_ingress", true), spec: svc("enable_ingress", true)},
		{name: "annotation removed to set the created value", old: svc(), spec: svc("enable_ingress", false), annotations: map[string]string{}},
		{name: "image changed to a bad one", old: svc(), spec: svc("image", "Bad Image")},
		{name: "image changed to latest", old: svc(), spec: svc("image", "nginx:latest")},
		{name: "image unchanged latest", old: svc("image", "nginx"), spec: svc("image", "nginx", "replicas", int64(2))},
		{name: "no rights for the children", user: "apps-only", spec: svc()},
		{name: "no rights for the Ingress", user: "no-ingress", spec: svc()},
		{name: "no rights for the Ingress, none asked", user: "no-ingress", spec: svc("enable_ingress", true)},
		{name: "no rights, bad image too", user: "apps-only", spec: svc("image", "Bad Image")},
		{name: "update turning the Ingress on", user: "no-ingress", old: svc("enable_ingress", true), spec: svc("enable_ingress", true),
			annotations: map[string]string{}},
		{name: "update by a user without rights, nothing turned on", user: "apps-only", old: svc(), spec: svc("replicas", int64(3))},
		{name: "reserved annotation", spec: svc(), annotations: map[string]string{"conversion.ingress.example.com/v1-spec": `{"exposure":"Ingress"}`}},
		{name: "reserved annotations", spec: svc(), annotations: map[string]string{
			"conversion.ingress.example.com/v1-spec": "{}", "conversion.ingress.example.com/v1beta1-spec": "{}"}},
		{name: "reserved annotation added on update", old: svc(), spec: svc(), annotations: map[string]string{
			requestedAnnotation: "false", "conversion.ingress.example.com/v1beta1-spec": "{}"}},
		{name: "v1 create", version: "v1", spec: v1("Ingress")},
		{name: "v1 create latest", version: "v1", spec: map[string]any{"image": "nginx"}},
		{name: "v1 bad image", version: "v1", spec: map[string]any{"image": "Nginx"}},
		{name: "v1 no rights", version: "v1", user: "apps-only", spec: v1("Service")},
		{name: "v1 no rights for the Ingress", version: "v1", user: "no-ingress", spec: v1("Ingress")},
		{name: "v1 update turning the Ingress on", version: "v1", user: "no-ingress", old: v1("Service"), spec: v1("Ingress")},
		{name: "v1 update with the conversion's annotation", version: "v1", old: v1("None"), spec: v1("Service"),
			annotations: map[string]string{"conversion.ingress.example.com/v1-spec": "{}"}},
	}
	for _, image := range appImages() {
		cases = append(cases, appAdmission{name: "image " + image, spec: svc("image", image)})
	}
	return cases
}

// TestAppPoliciesAgreeWithWebhooks: for every request of the corpus, the
// policies of manifests/policies give the webhooks' verdict, status code,
// reasons, warnings and stored object. Where a policy cannot say the same
// (knownDifference), the test says what differs.
func TestAppPoliciesAgreeWithWebhooks(t *testing.T) {
	setup(t)
	ctx := context.Background()
	suffix := rand.String(5)
	paths := map[string]string{"webhook": "app-by-webhook-" + suffix, byPolicy: "app-by-policy-" + suffix}
	for by, ns := range paths {
		if err := createNamespace(ctx, ns, by); err != nil {
			t.Fatal(err)
		}
		for user, rules := range appUsers {
			grantUser(t, ns, user, rules)
		}
	}
	for i, c := range appAdmissions() {
		if c.version == "" {
			c.version = "v1beta1"
		}
		name := fmt.Sprintf("case-%d", i)
		got := map[string]admissionOutcome{}
		for by, ns := range paths {
			out, err := admit(ctx, c, ns, name)
			if err != nil {
				t.Fatalf("%s (%s): %v", c.name, by, err)
			}
			got[by] = normalize(out, ns, c.version, by)
		}
		if c.unsaidByPolicy != "" {
			webhook := got["webhook"]
			i := slices.IndexFunc(webhook.Warnings, func(w string) bool { return strings.HasPrefix(w, c.unsaidByPolicy) })
			if i < 0 {
				t.Errorf("%s: the webhooks did not warn %q: %q", c.name, c.unsaidByPolicy, webhook.Warnings)
			} else {
				webhook.Warnings = slices.Clip(slices.Delete(webhook.Warnings, i, i+1))
				if len(webhook.Warnings) == 0 {
					webhook.Warnings = nil
				}
				got["webhook"] = webhook
			}
		}
		if !equalJSON(got["webhook"], got[byPolicy]) {
			t.Errorf("%s: the policies differ from the webhooks\nwebhooks: %+v\npolicies: %+v", c.name, got["webhook"], got[byPolicy])
		}
	}
}

// admit makes the request of c in ns, as c.user, with dryRun.
func admit(ctx context.Context, c appAdmission, ns, name string) (admissionOutcome, error) {
	gvr := appsV1beta1
	if c.version == "v1" {
		gvr = appsV1
	}
	client, warnings, err := clientAs(c.user)
	if err != nil {
		return admissionOutcome{}, err
	}
	dry := []string{metav1.DryRunAll}
	obj := annotatedApp(c.version, name, c.spec, c.annotations)
	var got *unstructured.Unstructured
	if c.old == nil {
		got, err = client.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{DryRun: dry, FieldValidation: "Strict"})
	} else {
		old, createErr := dyn.Resource(gvr).Namespace(ns).Create(ctx, annotatedApp(c.version, name, c.old, c.oldAnnotations), metav1.CreateOptions{})
		if err = createErr; err != nil {
			return admissionOutcome{}, fmt.Errorf("creating the App to update: %w", err)
		}
		obj.SetResourceVersion(old.GetResourceVersion())
		annotations := old.GetAnnotations()
		if c.annotations != nil {
			annotations = c.annotations // an update that sets the annotations
		}
		obj.SetAnnotations(annotations)
		warnings.take()
		got, err = client.Resource(gvr).Namespace(ns).Update(ctx, obj, metav1.UpdateOptions{DryRun: dry, FieldValidation: "Strict"})
		defer dyn.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}) //nolint:errcheck
	}
	out := admissionOutcome{Code: 200, Warnings: warnings.take()}
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		out.Code, out.Message = status.Status().Code, status.Status().Message
	case err != nil:
		return out, err
	default:
		out.Spec, _, _ = unstructured.NestedMap(got.Object, "spec")
		out.Requested = got.GetAnnotations()[requestedAnnotation]
	}
	return out, nil
}

var (
	deniedBy    = regexp.MustCompile(`^(admission webhook "[^"]+" denied the request|\S+ "[^"]+" is forbidden: ValidatingAdmissionPolicy '[^']+' with binding '[^']+' denied request): `)
	warnedBy    = regexp.MustCompile(`^Validation failed for ValidatingAdmissionPolicy '[^']+' with binding '[^']+': `)
	v1beta1Path = regexp.MustCompile(`spec\.enable_(service|ingress): Forbidden`)
)

// normalize takes out of an outcome what names the path rather than the
// decision: who denied or warned, the namespace, and the knownDifferences.
func normalize(out admissionOutcome, ns, version, by string) admissionOutcome {
	out.Message = strings.ReplaceAll(deniedBy.ReplaceAllString(out.Message, ""), ns, "NS")
	if by == "webhook" && version == "v1" {
		// The webhook reads a v1 App converted to v1beta1 and names
		// v1beta1's fields; the policy names the v1 field the user wrote.
		out.Message = v1beta1Path.ReplaceAllString(out.Message, "spec.exposure: Forbidden")
	}
	var warnings []string
	for _, w := range out.Warnings {
		w = warnedBy.ReplaceAllString(w, "")
		switch {
		case strings.HasPrefix(w, "spec.enable_ingress stays "):
			continue // knownDifference: the policy cannot see the update before mutation
		case strings.Contains(w, " requested, as the design notes' defaulting webhook specifies; "):
			w, _, _ = strings.Cut(w, " keeps the requested value") // knownDifference: the switch that turns it off
		}
		warnings = append(warnings, w)
	}
	slices.Sort(warnings)
	out.Warnings = warnings
	return out
}

// clientAs is a dynamic client impersonating user ("" the admin) that
// records the warnings it is sent.
func clientAs(user string) (dynamic.Interface, *warningsClient, error) {
	w := &warningsClient{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = w
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	d, err := dynamic.NewForConfig(cfg)
	return d, w, err
}

// grantUser gives user rules in ns.
func grantUser(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The API server type-checks the policies against the CRDs' schemas: a
// misspelt field or a type error shows as a warning there.
func TestAppPoliciesTypeCheck(t *testing.T) {
	setup(t)
	policies, err := controlplane.LoadAdmissionPolicies()
	if err != nil {
		t.Fatal(err)
	}
	// As the package installed them: the Pipeline policy once per
	// configuration of the allowlists.
	if err := pipelinePolicies(policies); err != nil {
		t.Fatal(err)
	}
	var warnings map[string][]string
	framework.Eventually(t, timeout, "the policies to be type-checked", func(ctx context.Context) (bool, error) {
		warnings, err = controlplane.TypeCheckWarnings(ctx, cp.Client, policies)
		return err == nil, nil
	})
	for name, ws := range warnings {
		for _, w := range ws {
			t.Errorf("ValidatingAdmissionPolicy %s: %s", name, w)
		}
	}
}
