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
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// TestControllersFlagLeavesAppsAlone runs a manager with the App controller
// disabled. (kube-controller-manager's semantics: "-app" alone would enable
// nothing, so the flag is "*,-app".) An App gets no children and no status,
// while the Ingress controller serves a Service created after it.
func TestControllersFlagLeavesAppsAlone(t *testing.T) {
	requireProcesses(t)
	ctx := context.Background()
	procs := startManagers(t, 1, append(shortLease.args(), "--controllers=*,-app")...)
	m, _ := waitForLeader(t, procs...)
	debug, err := m.Debug(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range debug.Controllers {
		names = append(names, c.Name)
	}
	if slices.Contains(names, appcontroller.ControllerName) || !slices.Contains(names, "ingress") {
		t.Fatalf("enabled controllers %v, want ingress and not app", names)
	}

	ns := newNamespace(t)
	app := createApp(t, ns, newApp("ignored", 1, true))
	svc, err := cluster.Kube.CoreV1().Services(ns).Create(ctx, annotatedService("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Ingress of a Service created after the App proves the manager
	// leads, has synced and works: an App controller would have had the
	// same time.
	waitIngress(t, ns, svc, convergeTimeout)

	selector := labels.SelectorFromSet(labels.Set{appcontroller.AppLabel: app.Name}).String()
	deployments, err := cluster.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	services, err := cluster.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items)+len(services.Items) != 0 {
		t.Errorf("App %s got %d Deployments and %d Services with the App controller disabled",
			app.Name, len(deployments.Items), len(services.Items))
	}
	got, err := cluster.Typed.AppV1beta1().Apps(ns).Get(ctx, app.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("App %s has a status with the App controller disabled: %s", app.Name, describeApp(got))
	}
	_, metrics, err := m.Get(ctx, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if line := metricLine(string(metrics), `controller="app"`); line != "" {
		t.Errorf("/metrics shows the App controller at work: %s", line)
	}
	if metricLine(string(metrics), `controller_manager_reconcile_total{controller="ingress"`) == "" {
		t.Errorf("/metrics has no reconcile_total of the ingress controller")
	}
}

// metricLine returns the first line of a Prometheus text exposition that
// contains s, or "".
func metricLine(exposition, s string) string {
	for line := range strings.Lines(exposition) {
		if !strings.HasPrefix(line, "#") && strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestCleanupRemovesOrphans runs the (off by default) Cleanup controller
// with short periods: a Deployment labelled as this manager's whose
// controlling App is gone is removed once it has been stale for the period,
// one annotated to be kept is not.
func TestCleanupRemovesOrphans(t *testing.T) {
	requireProcesses(t)
	ctx := context.Background()
	ns := newNamespace(t)
	orphan, err := cluster.Kube.AppsV1().Deployments(ns).Create(ctx, managedDeployment("orphan", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := cluster.Kube.AppsV1().Deployments(ns).Create(ctx, managedDeployment("kept", true), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	grantCleanupRBAC(t)
	procs := startManagers(t, 1, append(shortLease.args(),
		"--controllers=cleanup", "--cleanup-interval=1s", "--cleanup-stale-period=2s")...)
	waitForLeader(t, procs...)
	begin := time.Now()
	eventually(t, convergeTimeout, "the orphaned Deployment to be removed", func(ctx context.Context) (bool, error) {
		_, err := cluster.Kube.AppsV1().Deployments(ns).Get(ctx, orphan.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	t.Logf("orphan removed %v after the manager led", time.Since(begin).Round(10*time.Millisecond))
	if _, err := cluster.Kube.AppsV1().Deployments(ns).Get(ctx, kept.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Deployment annotated %s=true: %v", cleanup.KeepAnnotation, err)
	}
}

// grantCleanupRBAC adds what manifests/components/cleanup adds to the
// default install, which grants the (off by default) sweeper nothing: its
// ClusterRole and its binding to the manager's ServiceAccount (the
// component's subject names ndsl-system, which kustomize rewrites). They are
// removed when the test ends.
func grantCleanupRBAC(t *testing.T) {
	t.Helper()
	const binding = "ndsl-controller-manager:cleanup"
	role := []string{"-f", "manifests/components/cleanup/cleanup-controller.yaml"}
	if _, err := cluster.Kubectl(context.Background(), append([]string{"apply"}, role...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cluster.Kubectl(context.Background(), append([]string{"delete", "--ignore-not-found"}, role...)...)
		_, _ = cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "clusterrolebinding", binding)
	})
	if _, err := cluster.Kubectl(context.Background(), "create", "clusterrolebinding", binding, "--clusterrole="+binding,
		"--serviceaccount="+framework.ManagerNamespace+":controller-manager"); err != nil {
		t.Fatal(err)
	}
}

// managedDeployment is a Deployment with no pods carrying this manager's
// managed-by label, controlled by an App that is gone. The reference names a
// version the API server does not serve (as after a CRD version is removed):
// the garbage collector cannot resolve it and leaves the Deployment, the
// sweeper looks owners up by group and kind. (A Deployment without an owner,
// as `kubectl delete --cascade=orphan` leaves one, is never swept.)
func managedDeployment(name string, keep bool) *appsv1.Deployment {
	labels := map[string]string{controller.ManagedByLabel: controller.ManagedByValue, "e2e": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "ingress.example.com/v1alpha1", Kind: "App", Name: "gone", UID: uuid.NewUUID(), Controller: ptr.To(true),
		}}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	}
	if keep {
		d.Annotations = map[string]string{cleanup.KeepAnnotation: "true"}
	}
	return d
}
