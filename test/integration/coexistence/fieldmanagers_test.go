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

package coexistence

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
)

// settledApp creates an App of one replica with (service) or without a
// Service and waits until its Deployment runs and the manager has
// reconciled it; it returns the App and its Deployment.
func settledApp(t *testing.T, ns, name string, service bool) (types.UID, *appsv1.Deployment) {
	t.Helper()
	app := createApp(t, ns, newApp(name, ptr.To[int32](1), service))
	d := deploymentOf(t, ns, app.UID)
	available(t, ns, d.Name, 1)
	reconciled(t, ns, name)
	return app.UID, d
}

// reconcileAgain changes the App's spec in a way that leaves the
// Deployment's alone (it toggles the Service), and waits until the manager
// has reconciled that generation.
func reconcileAgain(t *testing.T, ns, name string, service bool) {
	t.Helper()
	patchAppSpec(t, ns, name, fmt.Sprintf(`{"enable_service":%t}`, service))
	reconciled(t, ns, name)
}

// untouched checks over the window that the Deployment keeps generation
// and what keep says, and that the manager has not written it since it made
// writes of them.
func untouched(t *testing.T, ns, name string, generation int64, writes int, keep func(*appsv1.Deployment) error) {
	t.Helper()
	holds(t, "Deployment "+name+" untouched by the manager", func(ctx context.Context) error {
		d, err := getDeployment(ctx, ns, name)
		if err != nil {
			return err
		}
		if err := keep(d); err != nil {
			return err
		}
		if d.Generation != generation {
			return errorf("generation %d, was %d after the other manager's change: its spec was rewritten", d.Generation, generation)
		}
		if n := managerWrites(deploymentsPath(ns), name) - writes; n != 0 {
			return errorf("the manager wrote the Deployment %d times since the other manager's change", n)
		}
		return nil
	})
}

// TestRolloutRestartKept restarts an App's Deployment as `kubectl rollout
// restart` does: the annotation on the pod template stays, and the manager
// does not rewrite the Deployment's spec.
func TestRolloutRestartKept(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	_, d := settledApp(t, ns, "restarted", false)
	writes := managerWrites(deploymentsPath(ns), d.Name)

	const annotation = "kubectl.kubernetes.io/restartedAt"
	restartedAt := time.Now().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, annotation, restartedAt)
	restarted, err := cp.Client.AppsV1().Deployments(ns).Patch(context.Background(), d.Name, types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{FieldManager: "kubectl-rollout"})
	if err != nil {
		t.Fatal(err)
	}
	available(t, ns, d.Name, 1)
	reconcileAgain(t, ns, "restarted", true)
	untouched(t, ns, d.Name, restarted.Generation, writes, func(d *appsv1.Deployment) error {
		if got := d.Spec.Template.Annotations[annotation]; got != restartedAt {
			return errorf("pod template annotation %s = %q, want %q", annotation, got, restartedAt)
		}
		return nil
	})
}

// TestSidecarAndEnvKept has another field manager (an injector, with
// server-side apply) add a sidecar container and an env var to the App's
// container: both stay, and the manager does not write the Deployment.
func TestSidecarAndEnvKept(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	_, d := settledApp(t, ns, "injected", false)
	writes := managerWrites(deploymentsPath(ns), d.Name)

	appContainer := d.Spec.Template.Spec.Containers[0].Name
	injection := appsv1ac.Deployment(d.Name, ns).WithSpec(appsv1ac.DeploymentSpec().
		WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(
			corev1ac.Container().WithName(appContainer).
				WithEnv(corev1ac.EnvVar().WithName("INJECTED").WithValue("yes")),
			corev1ac.Container().WithName("sidecar").WithImage("envoyproxy/envoy:v1.31"),
		))))
	injected, err := cp.Client.AppsV1().Deployments(ns).Apply(context.Background(), injection,
		metav1.ApplyOptions{FieldManager: "sidecar-injector", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	available(t, ns, d.Name, 1)
	reconcileAgain(t, ns, "injected", true)
	untouched(t, ns, d.Name, injected.Generation, writes, func(d *appsv1.Deployment) error {
		var sidecar, env bool
		for _, c := range d.Spec.Template.Spec.Containers {
			sidecar = sidecar || c.Name == "sidecar"
			if c.Name == appContainer {
				env = hasEnv(c.Env, "INJECTED", "yes")
			}
		}
		if !sidecar || !env {
			return errorf("sidecar kept: %t, env var kept: %t; containers %+v", sidecar, env, d.Spec.Template.Spec.Containers)
		}
		return nil
	})
}

func hasEnv(env []corev1.EnvVar, name, value string) bool {
	for _, e := range env {
		if e.Name == name && e.Value == value {
			return true
		}
	}
	return false
}

// Argo CD's marks on what it tracks.
const (
	argoLabel      = "app.kubernetes.io/instance"
	argoLabelValue = "my-argo-app"
	argoAnnotation = "argocd.argoproj.io/tracking-id"
)

// TestArgoCDTrackingKept has Argo CD (a patch by its own field manager)
// label and annotate the App's Deployment and Service as it tracks them:
// both marks stay through the manager's reconciles.
func TestArgoCDTrackingKept(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	uid, d := settledApp(t, ns, "tracked", true)
	svc := serviceOf(t, ns, uid)
	deploymentWrites := managerWrites(deploymentsPath(ns), d.Name)
	serviceWrites := managerWrites(servicesPath(ns), svc.Name)

	ctx := context.Background()
	trackingID := func(kind, name string) string {
		return fmt.Sprintf("%s:%s/%s:%s/%s", argoLabelValue, "apps", kind, ns, name)
	}
	mark := func(kind, name string) []byte {
		return fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q},"annotations":{%q:%q}}}`, argoLabel, argoLabelValue, argoAnnotation, trackingID(kind, name))
	}
	opts := metav1.PatchOptions{FieldManager: "argocd-controller"}
	marked, err := cp.Client.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.StrategicMergePatchType, mark("Deployment", d.Name), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Services(ns).Patch(ctx, svc.Name, types.StrategicMergePatchType, mark("Service", svc.Name), opts); err != nil {
		t.Fatal(err)
	}

	// Argo CD asks for an Ingress: the manager reconciles the App again.
	patchAppSpec(t, ns, "tracked", `{"enable_ingress":true}`)
	reconciled(t, ns, "tracked")
	tracked := func(meta metav1.ObjectMeta, kind string) error {
		if meta.Labels[argoLabel] != argoLabelValue || meta.Annotations[argoAnnotation] != trackingID(kind, meta.Name) {
			return errorf("%s %s: label %s=%q, annotation %s=%q; want Argo CD's %q and %q", kind, meta.Name,
				argoLabel, meta.Labels[argoLabel], argoAnnotation, meta.Annotations[argoAnnotation], argoLabelValue, trackingID(kind, meta.Name))
		}
		return nil
	}
	untouched(t, ns, d.Name, marked.Generation, deploymentWrites, func(d *appsv1.Deployment) error {
		if err := tracked(d.ObjectMeta, "Deployment"); err != nil {
			return err
		}
		s, err := cp.Client.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := tracked(s.ObjectMeta, "Service"); err != nil {
			return err
		}
		if n := managerWrites(servicesPath(ns), svc.Name) - serviceWrites; n != 0 {
			return errorf("the manager wrote the Service %d times since Argo CD's change", n)
		}
		return nil
	})
}
