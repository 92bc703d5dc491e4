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

package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// /metrics over HTTPS: no token → 401, a token without the shipped
// metrics-reader ClusterRole → 403, with it → 200. Probes stay open.
func TestMetricsNeedTokenAndRole(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	reader := framework.ServiceAccountWithClusterRoles(t, cp, ns, "rbac/metrics-reader.yaml")
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nobody, err := cp.ServiceAccountKubeconfig(ctx, ns, "nobody", "")
	if err != nil {
		t.Fatal(err)
	}

	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{ingress.ControllerName}
		o.Generic.SecureServing = true
	})
	if !strings.HasPrefix(m.URL, "https://") {
		t.Fatalf("manager URL %s is not HTTPS", m.URL)
	}
	framework.Eventually(t, 30*time.Second, "/readyz over HTTPS without a token", func(context.Context) (bool, error) {
		status, _, err := m.Get("/readyz")
		return status == 200, err
	})

	cases := []struct {
		name, token string
		want        int
	}{
		{"no token", "", 401},
		{"bad token", "not-a-token", 401},
		{"token without the role", nobody.BearerToken, 403},
		{"token with the metrics-reader role", reader.BearerToken, 200},
	}
	for _, tc := range cases {
		status, body, err := m.GetWithToken("/metrics", tc.token)
		if err != nil {
			t.Fatal(err)
		}
		if status != tc.want {
			t.Errorf("%s: GET /metrics = %d, want %d (%s)", tc.name, status, tc.want, strings.TrimSpace(body))
		}
		if status == 200 && !strings.Contains(body, "workqueue_depth") {
			t.Errorf("%s: /metrics body lacks workqueue_depth", tc.name)
		}
	}
	// The role grants /metrics only.
	if status, _, _ := m.GetWithToken("/debug/controllers", reader.BearerToken); status != 403 {
		t.Errorf("metrics-reader on /debug/controllers = %d, want 403", status)
	}
}
