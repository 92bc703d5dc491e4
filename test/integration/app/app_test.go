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

package app

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The design notes' sample, applied exactly as written, gets its Deployment
// and Service, and a status that follows the Deployment.
func TestSampleConverges(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()

	var sample map[string]any
	framework.LoadManifest(t, "samples/app.yaml", &sample)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(appv1beta1.SchemeGroupVersion.WithResource("apps")).Namespace(e.ns).
		Create(ctx, &unstructured.Unstructured{Object: sample}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the sample unchanged: %v", err)
	}
	app := e.waitConverged("app-sample")

	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "app-sample", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkControlled(t, d, app)
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 3 {
		t.Errorf("Deployment replicas = %d, want 3", got)
	}
	if sel := d.Spec.Selector.MatchLabels; len(sel) != 1 || sel[appcontroller.AppLabel] != "app-sample" {
		t.Errorf("Deployment selector = %v", sel)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "app" || cs[0].Image != "nginx:latest" ||
		len(cs[0].Ports) != 1 || cs[0].Ports[0].ContainerPort != 80 {
		t.Errorf("containers = %+v, want app nginx:latest on port 80", cs)
	}

	svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "app-sample", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkControlled(t, svc, app)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort != intstr.FromInt32(80) ||
		svc.Spec.Selector[appcontroller.AppLabel] != "app-sample" {
		t.Errorf("Service spec = %+v, want ClusterIP 80 -> 80 selecting the pods", svc.Spec)
	}
	if _, err := e.kube.NetworkingV1().Ingresses(e.ns).Get(ctx, "app-sample", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("enable_ingress is false, yet Get Ingress = %v", err)
	}

	// The deployment controller creates the pods (no scheduler runs them):
	// the App reports the replicas, not ready, rolling out, no URL.
	app = e.waitApp("app-sample", "3 replicas reported", func(a *appv1beta1.App) bool { return a.Status.Replicas == 3 })
	ready := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionReady)
	progressing := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionProgressing)
	if ready.Status != metav1.ConditionFalse || ready.Reason != appv1beta1.ReasonReplicasUnavailable {
		t.Errorf("Ready = %+v, want False/%s", ready, appv1beta1.ReasonReplicasUnavailable)
	}
	if progressing.Status != metav1.ConditionTrue || progressing.Reason != appv1beta1.ReasonRollingOut {
		t.Errorf("Progressing = %+v, want True/%s", progressing, appv1beta1.ReasonRollingOut)
	}
	if app.Status.URL != "" || app.Status.ReadyReplicas != 0 || app.Status.AvailableReplicas != 0 {
		t.Errorf("status = %+v, want no URL and nothing ready", app.Status)
	}
	// A new App's children make no Event (its status says they are there);
	// a child created again, after someone deleted it, does.
	if err := e.kube.CoreV1().Services(e.ns).Delete(ctx, "app-sample", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := e.waitEvent("app-sample", corev1.EventTypeNormal, "Created"); ev.Message != "Created Service" {
		t.Errorf("first Created event %q, want only the Service created again: a new App's children make none", ev.Message)
	}
}

func TestIngressWithoutServiceIsRejected(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	ns := framework.CreateNamespace(t, cp.Client)
	typed, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, err = typed.AppV1beta1().Apps(ns).Create(context.Background(), newApp("bad", false, true), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "enable_ingress requires enable_service") {
		t.Fatalf("creating an App with an Ingress and no Service: err = %v, want Invalid with the CEL message", err)
	}
}

// Each flag creates its child when turned on and deletes it when turned off.
func TestTogglingFlagsCreatesAndDeletesChildren(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	services := e.kube.CoreV1().Services(e.ns)
	ingresses := e.kube.NetworkingV1().Ingresses(e.ns)

	e.create(newApp("toggle", false, false))
	app := e.waitConverged("toggle")
	if _, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "toggle", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Deployment: %v", err)
	}
	for what, get := range map[string]func() error{
		"Service": func() error { _, err := services.Get(ctx, "toggle", metav1.GetOptions{}); return err },
		"Ingress": func() error { _, err := ingresses.Get(ctx, "toggle", metav1.GetOptions{}); return err },
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("%s of an App without it: Get = %v, want NotFound", what, err)
		}
	}

	e.patchSpec("toggle", `{"enable_service":true}`)
	app = e.waitApp("toggle", "the Service reported", func(a *appv1beta1.App) bool { return a.Generation == 2 && converged(a) })
	svc, err := services.Get(ctx, "toggle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkControlled(t, svc, app)

	e.patchSpec("toggle", `{"enable_ingress":true}`)
	wantURL := "http://toggle." + e.ns + "." + domain + "/"
	app = e.waitApp("toggle", "the Ingress reported", func(a *appv1beta1.App) bool { return converged(a) && a.Status.URL == wantURL })
	ing, err := ingresses.Get(ctx, "toggle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkControlled(t, ing, app)
	if ptr.Deref(ing.Spec.IngressClassName, "") != class || len(ing.Spec.Rules) != 1 {
		t.Fatalf("Ingress spec = %+v, want class %s and one rule", ing.Spec, class)
	}
	rule := ing.Spec.Rules[0]
	path := rule.HTTP.Paths[0]
	if rule.Host != "toggle."+e.ns+"."+domain || path.Path != "/" || ptr.Deref(path.PathType, "") != networkingv1.PathTypePrefix ||
		path.Backend.Service.Name != "toggle" || path.Backend.Service.Port.Number != 80 {
		t.Errorf("Ingress rule = %+v, want <app>.<ns>.%s / Prefix -> toggle:80", rule, domain)
	}

	e.patchSpec("toggle", `{"enable_ingress":false}`)
	e.waitGone("the Ingress", func(ctx context.Context) error {
		_, err := ingresses.Get(ctx, "toggle", metav1.GetOptions{})
		return err
	})
	e.waitApp("toggle", "the URL cleared", func(a *appv1beta1.App) bool { return converged(a) && a.Status.URL == "" })
	e.waitEvent("toggle", corev1.EventTypeNormal, "Deleted")

	e.patchSpec("toggle", `{"enable_service":false}`)
	e.waitGone("the Service", func(ctx context.Context) error {
		_, err := services.Get(ctx, "toggle", metav1.GetOptions{})
		return err
	})
	e.waitEventMessage("toggle", corev1.EventTypeNormal, "Deleted", "Deleted Service: the App no longer asks for it")
	e.waitApp("toggle", "converged without Service and Ingress", func(a *appv1beta1.App) bool { return a.Generation == 5 && converged(a) })
}

// Fields the controller sets are put back after a hand edit, fields it does
// not set are left alone, and children deleted by hand come back.
func TestHandEditsAreRevertedAndDeletesRecreated(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	deployments := e.kube.AppsV1().Deployments(e.ns)
	services := e.kube.CoreV1().Services(e.ns)
	ingresses := e.kube.NetworkingV1().Ingresses(e.ns)
	e.create(newApp("drift", true, true))
	e.waitConverged("drift")

	// Deployment: image and replicas edited, a label added. The
	// Deployment controller writes the Deployment too: retry on conflict.
	var d *appsv1.Deployment
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if d, err = deployments.Get(ctx, "drift", metav1.GetOptions{}); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "evil:1"
		d.Spec.Replicas = ptr.To[int32](5)
		d.Labels["team"] = "shop"
		_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "image and replicas put back", func(ctx context.Context) (bool, error) {
		var err error
		d, err = deployments.Get(ctx, "drift", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" && ptr.Deref(d.Spec.Replicas, 0) == 2, err
	})
	if d.Labels["team"] != "shop" {
		t.Errorf("a label the controller does not set was removed: %v", d.Labels)
	}
	e.waitEventMessage("drift", corev1.EventTypeNormal, "Updated", "Updated Deployment to match the App")

	// Service: the port re-keyed by hand (80 -> 8080), an annotation added.
	// The hand-made port is the editor's own field and is never removed;
	// the controller's port back beside it would leave two unnamed ports,
	// which the API server refuses: the App says so until the edit is undone.
	svc, err := services.Get(ctx, "drift", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].Port = 8080
	svc.Annotations = map[string]string{"note": "hand-added"}
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitApp("drift", "Degraded by the refused Service write", func(a *appv1beta1.App) bool {
		degraded := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionDegraded)
		return degraded != nil && degraded.Status == metav1.ConditionTrue && strings.Contains(degraded.Message, "spec.ports")
	})
	if svc, err = services.Get(ctx, "drift", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("the hand-made port was changed: %+v", svc.Spec.Ports)
	}
	svc.Spec.Ports[0].Port = 80
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitConverged("drift")
	framework.Eventually(t, timeout, "the Service port back", func(ctx context.Context) (bool, error) {
		svc, err = services.Get(ctx, "drift", metav1.GetOptions{})
		return err == nil && len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == 80 && svc.Spec.Ports[0].TargetPort == intstr.FromInt32(80), err
	})
	if svc.Annotations["note"] != "hand-added" {
		t.Errorf("an annotation the controller does not set was removed: %v", svc.Annotations)
	}

	// Service: the target port edited by hand.
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(9999)
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Service target port put back", func(ctx context.Context) (bool, error) {
		svc, err = services.Get(ctx, "drift", metav1.GetOptions{})
		return err == nil && len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].TargetPort == intstr.FromInt32(80), err
	})

	// Ingress: host edited.
	ing, err := ingresses.Get(ctx, "drift", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantHost := ing.Spec.Rules[0].Host
	ing.Spec.Rules[0].Host = "hand.edited"
	if _, err := ingresses.Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Ingress host put back", func(ctx context.Context) (bool, error) {
		ing, err = ingresses.Get(ctx, "drift", metav1.GetOptions{})
		return err == nil && ing.Spec.Rules[0].Host == wantHost, err
	})

	// Deleted by hand: each comes back as a new object.
	for kind, client := range map[string]interface {
		uid(ctx context.Context) (string, error)
		del(ctx context.Context) error
	}{
		"Deployment": childClient[*appsv1.Deployment]{get: deployments.Get, delete: deployments.Delete},
		"Service":    childClient[*corev1.Service]{get: services.Get, delete: services.Delete},
		"Ingress":    childClient[*networkingv1.Ingress]{get: ingresses.Get, delete: ingresses.Delete},
	} {
		oldUID, err := client.uid(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.del(ctx); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, timeout, "the "+kind+" recreated", func(ctx context.Context) (bool, error) {
			uid, err := client.uid(ctx)
			return err == nil && uid != oldUID, nil
		})
	}
	e.waitConverged("drift")
}

// childClient gets and deletes one child by the test's App name.
type childClient[T metav1.Object] struct {
	get    func(context.Context, string, metav1.GetOptions) (T, error)
	delete func(context.Context, string, metav1.DeleteOptions) error
}

func (c childClient[T]) uid(ctx context.Context) (string, error) {
	obj, err := c.get(ctx, "drift", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(obj.GetUID()), nil
}

func (c childClient[T]) del(ctx context.Context) error {
	return c.delete(ctx, "drift", metav1.DeleteOptions{})
}

// A same-name Service the App does not own is never modified or deleted;
// the App reports it as Degraded and keeps its other children.
func TestUnownedServiceIsLeftAlone(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	theirs, err := e.kube.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Labels: map[string]string{"owner": "someone-else"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "legacy"},
			Ports:    []corev1.ServicePort{{Port: 1234}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.create(newApp("legacy", true, false))

	app := e.waitApp("legacy", "Degraded by the unowned Service", func(a *appv1beta1.App) bool {
		c := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	degraded := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionDegraded)
	if degraded.Reason != appv1beta1.ReasonResourceExists || !strings.Contains(degraded.Message, "Service "+e.ns+"/legacy") {
		t.Errorf("Degraded = %s %q, want reason %s naming Service %s/legacy", degraded.Reason, degraded.Message, appv1beta1.ReasonResourceExists, e.ns)
	}
	ready := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != appv1beta1.ReasonResourceMissing {
		t.Errorf("Ready = %s/%s, want False/%s", ready.Status, ready.Reason, appv1beta1.ReasonResourceMissing)
	}
	event := e.waitEvent("legacy", corev1.EventTypeWarning, appv1beta1.ReasonResourceExists)
	if !strings.Contains(event.Message, "Service") || !strings.Contains(event.Message, "legacy") {
		t.Errorf("event message %q does not name the Service", event.Message)
	}
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the conflict kept the Deployment from being created: %v", err)
	}
	checkControlled(t, d, app)

	// Turning the Service off must not delete what is not the App's either.
	e.patchSpec("legacy", `{"enable_service":false}`)
	e.waitApp("legacy", "no longer Degraded", func(a *appv1beta1.App) bool { return a.Generation == 2 && converged(a) })
	got, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the unowned Service is gone: %v", err)
	}
	if got.ResourceVersion != theirs.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("the unowned Service was modified: resourceVersion %s -> %s, owners %v",
			theirs.ResourceVersion, got.ResourceVersion, got.OwnerReferences)
	}
}

// Deleting an App deletes its children: the garbage collector follows the
// controller references.
func TestDeletingAppRemovesChildren(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	e.create(newApp("doomed", true, true))
	e.waitConverged("doomed")
	if err := e.apps.Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The garbage collector learns of resources it did not know at start,
	// like the App CRD installed by these tests, by polling discovery every
	// 30 seconds: allow for that.
	framework.Eventually(t, 3*timeout, "the children to be garbage collected", func(ctx context.Context) (bool, error) {
		gone := 0
		for _, get := range []func() error{
			func() error {
				_, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "doomed", metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "doomed", metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := e.kube.NetworkingV1().Ingresses(e.ns).Get(ctx, "doomed", metav1.GetOptions{})
				return err
			},
		} {
			switch err := get(); {
			case apierrors.IsNotFound(err):
				gone++
			case err != nil:
				return false, err
			}
		}
		return gone == 3, nil
	})
}

// Changing the App's port moves the container port, the Service port and
// the Ingress backend, and leaves no trace of the old port: the port lists
// are the App's alone.
func TestPortChangeMovesEveryChild(t *testing.T) {
	e := setup(t, nil)
	e.create(newApp("ports", true, true))
	e.waitConverged("ports")
	e.patchSpec("ports", `{"port":8080}`)
	e.waitApp("ports", "converged on port 8080", func(a *appv1beta1.App) bool { return a.Generation == 2 && converged(a) })

	ctx := context.Background()
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "ports", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Spec.Template.Spec.Containers[0].Ports; len(p) != 1 || p[0].ContainerPort != 8080 {
		t.Errorf("container ports = %+v, want only 8080", p)
	}
	svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "ports", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 8080 || p[0].TargetPort != intstr.FromInt32(8080) {
		t.Errorf("Service ports = %+v, want only 8080 -> 8080", p)
	}
	ing, err := e.kube.NetworkingV1().Ingresses(e.ns).Get(ctx, "ports", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; b.Port.Number != 8080 {
		t.Errorf("Ingress backend = %+v, want port 8080", b)
	}
}
