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
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// pipelineAuthorRole is the shipped role for Pipeline authors
// (manifests/rbac/user-roles.yaml).
const pipelineAuthorRole = "ndsl-controller-manager:pipeline-author"

// teamPipeline is a Pipeline whose children go to namespace ns.
func teamPipeline(name, ns, image string) *unstructured.Unstructured {
	spec := map[string]any{
		"steps":        []any{map[string]any{"model": "m", "image": image}},
		"modelStorage": map[string]any{"type": "nfs", "csiParameter": map[string]any{"server": "192.168.20.235", "share": "/home/aiedge/" + name}},
	}
	if ns != "" {
		spec["namespace"] = ns
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "distri-infer.ndsl.cn/v1beta1", "kind": "Pipeline",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

// teamAuthor makes user a Pipeline author, as an administrator would (the
// shipped role, cluster-wide), with the built-in edit role in ns only, and
// returns a client acting as user.
func teamAuthor(t *testing.T, user, ns string) dynamic.Interface {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-pipeline-author"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: pipelineAuthorRole},
		Subjects:   subjects,
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   subjects,
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer's caches, and the aggregation of edit, lag the
	// bindings a little.
	framework.Eventually(t, timeout, user+"'s rights", func(ctx context.Context) (bool, error) {
		for _, attrs := range []authorizationv1.ResourceAttributes{
			{Verb: "create", Group: "distri-infer.ndsl.cn", Resource: "pipelines"},
			{Verb: "create", Group: "apps", Resource: "deployments", Namespace: ns},
			{Verb: "create", Resource: "persistentvolumeclaims", Namespace: ns},
		} {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
			got, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil || !got.Status.Allowed {
				return false, err
			}
		}
		return true, nil
	})
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refused checks that err is the webhook's refusal, containing every want.
func refused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: admitted; want refused with %q", what, want)
		return
	}
	t.Logf("%s: %v", what, err)
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource") {
		t.Errorf("%s: refused by RBAC, not by the webhook: %v", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", what, err, w)
		}
	}
}

// Two teams, each an author of Pipelines (the shipped role) with edit in
// its own namespace only: neither creates, changes, moves or deletes a
// Pipeline in the other's namespace, nor in --pipeline-namespace; each
// works with its own, and a metadata-only change needs no rights in the
// namespace (issue 35, item 2).
func TestPipelineRequesterRights(t *testing.T) {
	setup(t)
	ctx := context.Background()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := kubectl(t, "apply", "-f", filepath.Join(root, "manifests", "rbac", "user-roles.yaml")); err != nil {
		t.Fatalf("applying the shipped user roles: %v", err)
	}
	const nsA, nsB = "rights-team-a", "rights-team-b"
	alice := teamAuthor(t, "alice", nsA).Resource(pipelinesV1beta1)
	bob := teamAuthor(t, "bob", nsB).Resource(pipelinesV1beta1)
	cleanup := func(name string) {
		t.Cleanup(func() { _ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}

	// Each team in its own namespace.
	cleanup("alice-own")
	if _, err := alice.Create(ctx, teamPipeline("alice-own", nsA, "nginx:1.27"), strict); err != nil {
		t.Fatalf("alice's Pipeline in her namespace: %v", err)
	}
	cleanup("bob-own")
	if _, err := bob.Create(ctx, teamPipeline("bob-own", nsB, "nginx:1.27"), strict); err != nil {
		t.Fatalf("bob's Pipeline in his namespace: %v", err)
	}

	// Creates elsewhere.
	cleanup("alice-in-b")
	_, err = alice.Create(ctx, teamPipeline("alice-in-b", nsB, "nginx:1.27"), strict)
	refused(t, "alice creates a Pipeline in bob's namespace", err,
		`spec.namespace: Forbidden: user "alice" may not create deployments.apps in namespace "rights-team-b"`,
		`user "alice" may not create services in namespace "rights-team-b"`,
		`user "alice" may not create persistentvolumeclaims in namespace "rights-team-b"`)
	cleanup("alice-default")
	_, err = alice.Create(ctx, teamPipeline("alice-default", "", "nginx:1.27"), strict)
	refused(t, "alice creates a Pipeline without spec.namespace", err,
		`user "alice" may not create deployments.apps in namespace "pipeline"`)

	// Changes to bob's Pipeline.
	reimage, err := bob.Get(ctx, "bob-own", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	steps, _, _ := unstructured.NestedSlice(reimage.Object, "spec", "steps")
	steps[0].(map[string]any)["image"] = "registry.example.com/alice/anything:1"
	_ = unstructured.SetNestedSlice(reimage.Object, steps, "spec", "steps")
	_, err = alice.Update(ctx, reimage, metav1.UpdateOptions{})
	refused(t, "alice re-images bob's Pipeline", err, `user "alice" may not create deployments.apps in namespace "rights-team-b"`)

	move, err := bob.Get(ctx, "bob-own", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(move.Object, nsA, "spec", "namespace")
	_, err = alice.Update(ctx, move, metav1.UpdateOptions{})
	refused(t, "alice moves bob's Pipeline into her namespace", err, `user "alice" may not create deployments.apps in namespace "rights-team-b"`)
	if move, err = bob.Get(ctx, "bob-own", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(move.Object, nsA, "spec", "namespace")
	_, err = bob.Update(ctx, move, metav1.UpdateOptions{})
	refused(t, "bob moves his Pipeline into alice's namespace", err, `user "bob" may not create deployments.apps in namespace "rights-team-a"`)

	relabel, err := bob.Get(ctx, "bob-own", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	relabel.SetLabels(map[string]string{"seen-by": "alice"})
	if _, err := alice.Update(ctx, relabel, metav1.UpdateOptions{}); err != nil {
		t.Errorf("alice relabels bob's Pipeline, a metadata-only change: %v", err)
	}

	err = alice.Delete(ctx, "bob-own", metav1.DeleteOptions{})
	refused(t, "alice deletes bob's Pipeline", err,
		`Pipeline "bob-own" cannot be deleted`, `user "alice" may not delete deployments.apps in namespace "rights-team-b"`)
	if _, err := dyn.Resource(pipelinesV1beta1).Get(ctx, "bob-own", metav1.GetOptions{}); err != nil {
		t.Errorf("bob's Pipeline after alice's delete: %v", err)
	}

	// Each team deletes its own.
	if err := bob.Delete(ctx, "bob-own", metav1.DeleteOptions{}); err != nil {
		t.Errorf("bob deletes his Pipeline: %v", err)
	}
	if err := alice.Delete(ctx, "alice-own", metav1.DeleteOptions{}); err != nil {
		t.Errorf("alice deletes her Pipeline: %v", err)
	}
}

// A user who may write Apps in a namespace (the shipped app-editor role
// alone) but not Deployments or Services there gets no App: the manager
// would create them on the user's behalf (issue 35, item 2).
func TestAppRequesterRights(t *testing.T) {
	setup(t)
	ctx := context.Background()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := kubectl(t, "apply", "-f", filepath.Join(root, "manifests", "rbac", "user-roles.yaml")); err != nil {
		t.Fatalf("applying the shipped user roles: %v", err)
	}
	const ns, user = "rights-apps", "carol"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-app-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ndsl-controller-manager:app-editor"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ingress.example.com/v1beta1", "kind": "App",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec":     map[string]any{"image": "nginx:1.27", "replicas": int64(1), "port": int64(80), "enable_service": true},
	}}
	// Until the RBAC authorizer has seen the binding, the create is
	// refused by RBAC rather than by the webhook.
	framework.Eventually(t, timeout, "carol's App to reach the webhook", func(ctx context.Context) (bool, error) {
		_, err = c.Resource(appsV1beta1).Namespace(ns).Create(ctx, app, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil || !apierrors.IsForbidden(err), nil
	})
	refused(t, "carol creates an App with only app-editor", err,
		`metadata.namespace: Forbidden: user "carol" may not create deployments.apps in namespace "rights-apps"`,
		`spec.enable_service: Forbidden: user "carol" may not create services in namespace "rights-apps"`)
}
