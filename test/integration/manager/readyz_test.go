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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A manager one of whose controllers cannot list (its RBAC is missing) is
// alive and, as the webhook Service routes by /readyz, ready: it serves
// webhooks. Its controllers' caches are reported unsynced on their own
// check, /readyz/informer-sync. Once it is granted the Ingress controller's
// ClusterRole from manifests/ (and nothing more) its caches sync and the
// controller works.
func TestWebhookReadinessIgnoresUnsyncedControllerAndShippedRBACSuffices(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	saConfig := framework.ServiceAccount(t, cp, ns)
	certDir := framework.WriteServingCertificate(t, "127.0.0.1")

	m := framework.StartManager(t, saConfig, func(o *options.Options) {
		o.Generic.Controllers = []string{ingress.ControllerName}
		// Webhooks from a mounted certificate: no RBAC for the Secret needed.
		o.Webhook = options.DefaultWebhookOptions()
		o.Webhook.Address = "127.0.0.1"
		o.Webhook.Port = 0
		o.Webhook.CertDir = certDir
	})
	framework.Eventually(t, 10*time.Second, "the manager's HTTP server", func(context.Context) (bool, error) {
		status, _, err := m.Get("/healthz")
		return status == 200, err
	})
	// Give the informers time to try and fail; the controllers stay unsynced.
	framework.Eventually(t, 10*time.Second, "a failing informer-sync check", func(context.Context) (bool, error) {
		status, _, err := m.Get("/readyz/informer-sync")
		return status == 500, err
	})
	status, body, err := m.Get("/readyz?verbose")
	if err != nil || status != 200 || !strings.Contains(body, "[+]webhook-certificate ok") {
		t.Errorf("/readyz while a controller cannot sync = %d %q (%v), want 200 with the webhook certificate check", status, body, err)
	}
	if status, _, _ := m.Get("/livez"); status != 200 {
		t.Errorf("/livez = %d while caches sync, want 200", status)
	}
	checkMountedCertificateExpiry(t, m, certDir)

	framework.GrantClusterRoles(t, cp, ns, "rbac/controllers/ingress.yaml")

	// The reflectors back off up to 30 s between failed lists.
	framework.Eventually(t, 90*time.Second, "/readyz/informer-sync to pass", func(context.Context) (bool, error) {
		status, _, err := m.Get("/readyz/informer-sync")
		return status == 200, err
	})

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{ingress.AnnotationEnabled: "true"}},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the Ingress, made with the shipped RBAC only", func(ctx context.Context) (bool, error) {
		_, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil, err
	})
}

// checkMountedCertificateExpiry: a certificate mounted from elsewhere
// (cert-manager) has its expiry exported like a managed one, for the
// certificate expiry alert (issue 23).
func checkMountedCertificateExpiry(t *testing.T, m *framework.Manager, certDir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(certDir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := certutil.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	const series = `controller_manager_webhook_certificate_expiry_timestamp_seconds{kind="serving"} `
	want := parsed[0].NotAfter.Unix()
	_, body, err := m.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			if got, err := strconv.ParseFloat(v, 64); err != nil || int64(got) != want {
				t.Errorf("%s%s, want %d (the mounted certificate's NotAfter)", series, v, want)
			}
			return
		}
	}
	t.Errorf("/metrics has no %s: the mounted certificate's expiry is not exported", series)
}
