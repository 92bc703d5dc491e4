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

package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// ServiceAccountWithClusterRoles creates a ServiceAccount "manager" in ns,
// grants it the ClusterRoles of the given files under manifests/ and returns
// a client config authenticating as it: a manager run with it proves the
// shipped RBAC suffices.
func ServiceAccountWithClusterRoles(t testing.TB, cp *controlplane.ControlPlane, ns string, manifests ...string) *rest.Config {
	t.Helper()
	cfg := ServiceAccount(t, cp, ns)
	GrantClusterRoles(t, cp, ns, manifests...)
	return cfg
}

// ServiceAccount creates a ServiceAccount "manager" in ns, with no
// permissions, and returns a client config authenticating as it.
func ServiceAccount(t testing.TB, cp *controlplane.ControlPlane, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "manager"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.ServiceAccountKubeconfig(ctx, ns, "manager", "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// GrantClusterRoles binds the ServiceAccount "manager" of ns to the
// ClusterRoles of the given files under manifests/, renamed after ns so that
// tests do not collide, and removes them when the test ends.
func GrantClusterRoles(t testing.TB, cp *controlplane.ControlPlane, ns string, manifests ...string) {
	t.Helper()
	for _, file := range manifests {
		var role rbacv1.ClusterRole
		LoadManifest(t, file, &role)
		grant(t, cp, ns, &role)
	}
}

// GrantRole binds the ServiceAccount "manager" of ns to a ClusterRole named
// after ns and name with role's rules: what a controller declares, before
// make generate renders it into manifests/.
func GrantRole(t testing.TB, cp *controlplane.ControlPlane, ns, name string, role controller.Role) {
	t.Helper()
	grant(t, cp, ns, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: role.PolicyRules()})
}

// grant creates role, renamed after ns so that tests do not collide, and
// binds the ServiceAccount "manager" of ns to it until the test ends.
func grant(t testing.TB, cp *controlplane.ControlPlane, ns string, role *rbacv1.ClusterRole) {
	t.Helper()
	ctx := context.Background()
	client := cp.Client
	role.Name = ns + ":" + role.Name
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "manager"}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
}
