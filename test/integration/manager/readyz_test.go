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

// A manager whose informers cannot list yet is alive but not ready; once it
// is granted the Ingress controller's ClusterRole from manifests/ (and
// nothing more) its caches sync, /readyz turns ready and the controller works.
func TestReadyzWaitsForCachesAndShippedRBACSuffices(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	saConfig := framework.ServiceAccount(t, cp, ns)

	m := framework.StartManager(t, saConfig, func(o *options.Options) {
		o.Generic.Controllers = []string{ingress.ControllerName}
	})
	framework.Eventually(t, 10*time.Second, "the manager's HTTP server", func(context.Context) (bool, error) {
		status, _, err := m.Get("/healthz")
		return status == 200, err
	})
	// Give the informers time to try and fail; the instance stays unready.
	framework.Eventually(t, 10*time.Second, "a failing informer-sync check", func(context.Context) (bool, error) {
		status, body, err := m.Get("/readyz")
		return status == 500 && strings.Contains(body, "informer-sync failed"), err
	})
	if status, _, _ := m.Get("/livez"); status != 200 {
		t.Errorf("/livez = %d while caches sync, want 200", status)
	}

	framework.GrantClusterRoles(t, cp, ns, "rbac/ingress-controller.yaml")

	// The reflectors back off up to 30 s between failed lists.
	framework.Eventually(t, 90*time.Second, "/readyz to turn ready", func(context.Context) (bool, error) {
		status, _, err := m.Get("/readyz")
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
