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
	"bytes"
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	charttest "github.com/ndsl/controller-manager/cmd/chart-test/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// testHooks are the objects of templates/tests, by kind.
func testHooks(objects []object) map[string]object {
	out := map[string]object{}
	for _, o := range objects {
		if o.annotations()["helm.sh/hook"] == "test" {
			out[o.kind()] = o
		}
	}
	return out
}

// Issue 37: the chart has a helm test: a Pod of tests.image that runs as a
// ServiceAccount of its own, bound by a Role to create, get and delete Apps
// in the release's namespace and nothing else, all of them test hooks, the
// RBAC deleted once the test passed; tests.enabled=false renders none.
func TestChartRendersHelmTest(t *testing.T) {
	hooks := testHooks(render(t, "platform", nil))
	if len(hooks) != 4 {
		t.Fatalf("test hooks %v, want a ServiceAccount, a Role, a RoleBinding and a Pod", slices.Sorted(maps.Keys(hooks)))
	}
	for kind, o := range hooks {
		policy, _ := o.annotations()["helm.sh/hook-delete-policy"].(string)
		want := "before-hook-creation,hook-succeeded"
		if kind == "Pod" {
			want = "before-hook-creation" // kept for helm test --logs
		}
		if policy != want {
			t.Errorf("%s: hook-delete-policy %q, want %q", o.key(), policy, want)
		}
		if o.namespace() != "platform" || o.name() != "controller-manager-test" {
			t.Errorf("%s: want controller-manager-test in the release's namespace", o.key())
		}
	}
	var role rbacv1.Role
	hooks["Role"].into(t, &role)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"ingress.example.com"}, Resources: []string{"apps"}, Verbs: []string{"create", "get", "delete"}}}
	if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool { return a.String() == b.String() }) {
		t.Errorf("Role rules %v, want %v", role.Rules, want)
	}
	var pod corev1.Pod
	hooks["Pod"].into(t, &pod)
	c := pod.Spec.Containers[0]
	if pod.Spec.ServiceAccountName != "controller-manager-test" || c.Image != "controller-manager-chart-test:v0.1.0" ||
		!slices.Contains(c.Args, "--version=v1beta1") || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Pod: serviceAccountName %s, image %s, args %v, restartPolicy %s; want controller-manager-test, the appVersion's tag, --version=v1beta1, Never",
			pod.Spec.ServiceAccountName, c.Image, c.Args, pod.Spec.RestartPolicy)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem ||
		pod.Spec.SecurityContext == nil || pod.Spec.SecurityContext.RunAsNonRoot == nil || pod.Spec.SecurityContext.RunAsUser != nil {
		t.Errorf("Pod: security contexts %+v / %+v, want the chart's (non-root, no fixed UID, read-only root)", pod.Spec.SecurityContext, c.SecurityContext)
	}

	hooks = testHooks(render(t, "platform", map[string]any{
		"webhooks": map[string]any{"enabled": false},
		"tests":    map[string]any{"image": map[string]any{"repository": "registry.example.com/chart-test", "tag": "v9"}, "timeout": "30s"},
	}))
	hooks["Pod"].into(t, &pod)
	c = pod.Spec.Containers[0]
	if c.Image != "registry.example.com/chart-test:v9" || !slices.Contains(c.Args, "--version=v1") || !slices.Contains(c.Args, "--timeout=30s") {
		t.Errorf("Pod with tests.image, tests.timeout and no webhooks: image %s, args %v", c.Image, c.Args)
	}
	if hooks := testHooks(render(t, "platform", map[string]any{"tests": map[string]any{"enabled": false}})); len(hooks) != 0 {
		t.Errorf("tests.enabled=false rendered test hooks: %v", hooks)
	}
}

// Issue 37: the helm test's program, with the Pod's arguments and as the
// ServiceAccount the chart binds (no more rights than that), creates an App
// in the release's namespace, sees the manager converge it, and deletes it.
// The API server here runs no pods, so the program runs in the test, as
// the Pod would.
func TestChartHelmTestAgainstManager(t *testing.T) {
	const ns = "platform"
	ctx := context.Background()
	kubeconfig := cp.KubeconfigPath
	values := map[string]any{"webhooks": map[string]any{"enabled": false}} // the API server here cannot reach a webhook Service
	installing(t, ns)
	if out, err := helm(t, "upgrade", release, chartDir(t), "--install", "--kubeconfig", kubeconfig, "--namespace", ns,
		"--create-namespace", "-f", valuesFile(t, values)); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	out, err := helm(t, "get", "hooks", release, "--kubeconfig", kubeconfig, "--namespace", ns)
	if err != nil {
		t.Fatal(err)
	}
	hooks := testHooks(decode(t, out))
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	var pod corev1.Pod
	hooks["ServiceAccount"].into(t, &sa)
	hooks["Role"].into(t, &role)
	hooks["RoleBinding"].into(t, &binding)
	hooks["Pod"].into(t, &pod)
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().ServiceAccounts(ns).Delete(ctx, sa.Name, metav1.DeleteOptions{})
		_ = cp.Client.RbacV1().Roles(ns).Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = cp.Client.RbacV1().RoleBindings(ns).Delete(ctx, binding.Name, metav1.DeleteOptions{})
	})
	saKubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if _, err := cp.ServiceAccountKubeconfig(ctx, ns, sa.Name, saKubeconfig); err != nil {
		t.Fatal(err)
	}
	// Least privilege: nothing beyond the Apps of the release's namespace.
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Namespace: "default", Verb: "create", Group: "ingress.example.com", Resource: "apps"},
		{Namespace: ns, Verb: "list", Group: "ingress.example.com", Resource: "apps"},
		{Namespace: ns, Verb: "update", Group: "ingress.example.com", Resource: "apps"},
		{Namespace: ns, Verb: "get", Resource: "secrets"},
		{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":" + sa.Name, ResourceAttributes: &attrs,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}}
		got, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed {
			t.Errorf("the helm test's ServiceAccount may %s %s/%s in %q", attrs.Verb, attrs.Group, attrs.Resource, attrs.Namespace)
		}
	}

	framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName}
	})
	// As the Pod runs it: its arguments, its namespace from the downward API.
	t.Setenv("POD_NAMESPACE", ns)
	args := append(slices.Clone(pod.Spec.Containers[0].Args), "--kubeconfig="+saKubeconfig)
	var report bytes.Buffer
	if err := charttest.Run(ctx, args, &report); err != nil {
		t.Fatalf("chart-test %v: %v\n%s", args, err, report.String())
	}
	for _, step := range []string{"created App", "converged: Ready True", "deleted App"} {
		if !strings.Contains(report.String(), step) {
			t.Errorf("chart-test reported no %q:\n%s", step, report.String())
		}
	}
	apps, err := versioned.NewForConfigOrDie(cp.Config).AppV1().Apps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range apps.Items {
		if a.DeletionTimestamp == nil {
			t.Errorf("App %s left behind", a.Name)
		}
	}
}
