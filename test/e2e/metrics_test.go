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

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metricsReaderRole is the scraper's ClusterRole installed by manifests/default.
const metricsReaderRole = "ndsl-controller-manager:metrics-reader"

// TestMetricsEndpointIsProtected scrapes the running binary's /metrics over
// HTTPS: no token → 401, a ServiceAccount without the shipped
// metrics-reader ClusterRole → 403, one bound to it → 200. The probes stay
// open to callers without a token, as the kubelet is.
func TestMetricsEndpointIsProtected(t *testing.T) {
	requireProcesses(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for _, name := range []string{"scraper", "stranger"} {
		if _, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}
	if _, err := cluster.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	scraper, err := cluster.ServiceAccountToken(ctx, ns, "scraper", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := cluster.ServiceAccountToken(ctx, ns, "stranger", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	m := startManagers(t, 1, shortLease.args()...)[0]
	if !strings.HasPrefix(m.URL, "https://") {
		t.Fatalf("the manager serves %s, want HTTPS", m.URL)
	}
	for _, probe := range []string{"/healthz", "/livez"} {
		if status, _, err := m.GetWithToken(ctx, probe, ""); err != nil || status != 200 {
			t.Errorf("GET %s without a token = %d (%v), want 200", probe, status, err)
		}
	}
	cases := []struct {
		who, token string
		want       int
	}{
		{"no token", "", 401},
		{"a ServiceAccount without the role", stranger, 403},
		{"a ServiceAccount bound to " + metricsReaderRole, scraper, 200},
	}
	for _, tc := range cases {
		status, body, err := m.GetWithToken(ctx, "/metrics", tc.token)
		if err != nil {
			t.Fatal(err)
		}
		if status != tc.want {
			t.Errorf("GET /metrics as %s = %d, want %d: %s", tc.who, status, tc.want, strings.TrimSpace(string(body)))
		}
		if status == 200 && !strings.Contains(string(body), "workqueue_depth") {
			t.Errorf("GET /metrics as %s: no workqueue_depth in the body", tc.who)
		}
	}
}
