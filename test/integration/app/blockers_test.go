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
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// unblockedWithin bounds how long an owner takes to get its child once the
// blocker is gone: an event's worth, far below any resync.
const unblockedWithin = 20 * time.Second

// An App kept from a child by a same-name object it does not control is
// retried until its budget is spent and its key dropped. The blocker going
// away later must still bring it the child at once, not at the next resync
// 12-24 h later (issue 12, defect 2). One App per child kind, so each
// kind's delete event has to do the unblocking alone.
func TestBlockerGoneAfterTheRetryBudgetUnblocksTheApp(t *testing.T) {
	e := setupWith(t, nil, func(o *options.Options) { o.App.MaxRetries = 2 })
	ctx := context.Background()
	labels := map[string]string{"owner": "someone-else"}
	blockers := []struct {
		app    *appv1beta1.App
		kind   string
		create func() error
		delete func() error
		ourOwn func(ctx context.Context) (metav1.Object, error)
	}{{
		app:  newApp("blocked-deployment", false, false),
		kind: "Deployment",
		create: func() error {
			_, err := e.kube.AppsV1().Deployments(e.ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "blocked-deployment", Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](0),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
		delete: func() error {
			return e.kube.AppsV1().Deployments(e.ns).Delete(ctx, "blocked-deployment", metav1.DeleteOptions{})
		},
		ourOwn: func(ctx context.Context) (metav1.Object, error) {
			return e.kube.AppsV1().Deployments(e.ns).Get(ctx, "blocked-deployment", metav1.GetOptions{})
		},
	}, {
		app:  newApp("blocked-service", true, false),
		kind: "Service",
		create: func() error {
			_, err := e.kube.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "blocked-service", Labels: labels},
				Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 1234}}},
			}, metav1.CreateOptions{})
			return err
		},
		delete: func() error {
			return e.kube.CoreV1().Services(e.ns).Delete(ctx, "blocked-service", metav1.DeleteOptions{})
		},
		ourOwn: func(ctx context.Context) (metav1.Object, error) {
			return e.kube.CoreV1().Services(e.ns).Get(ctx, "blocked-service", metav1.GetOptions{})
		},
	}, {
		app:  newApp("blocked-ingress", true, true),
		kind: "Ingress",
		create: func() error {
			_, err := e.kube.NetworkingV1().Ingresses(e.ns).Create(ctx, &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Name: "blocked-ingress", Labels: labels},
				Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "other", Port: networkingv1.ServiceBackendPort{Number: 1}},
				}},
			}, metav1.CreateOptions{})
			return err
		},
		delete: func() error {
			return e.kube.NetworkingV1().Ingresses(e.ns).Delete(ctx, "blocked-ingress", metav1.DeleteOptions{})
		},
		ourOwn: func(ctx context.Context) (metav1.Object, error) {
			return e.kube.NetworkingV1().Ingresses(e.ns).Get(ctx, "blocked-ingress", metav1.GetOptions{})
		},
	}}

	for _, b := range blockers {
		if err := b.create(); err != nil {
			t.Fatalf("creating the unowned %s: %v", b.kind, err)
		}
		e.create(b.app)
	}
	for _, b := range blockers {
		app := e.waitApp(b.app.Name, "Degraded by the unowned "+b.kind, func(a *appv1beta1.App) bool {
			c := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionDegraded)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == appv1beta1.ReasonResourceExists
		})
		if msg := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionDegraded).Message; !strings.Contains(msg, b.kind+" "+e.ns+"/"+b.app.Name) {
			t.Errorf("App %s: Degraded message %q does not name the unowned %s", b.app.Name, msg, b.kind)
		}
		// The retry budget is spent: the key is dropped.
		e.waitEvent(b.app.Name, corev1.EventTypeWarning, "ReconcileFailed")
	}

	deleted := time.Now()
	for _, b := range blockers {
		if err := b.delete(); err != nil {
			t.Fatalf("deleting the unowned %s: %v", b.kind, err)
		}
	}
	for _, b := range blockers {
		framework.Eventually(t, unblockedWithin, "App "+b.app.Name+"'s own "+b.kind, func(ctx context.Context) (bool, error) {
			obj, err := b.ourOwn(ctx)
			if err != nil {
				return false, nil
			}
			ref := metav1.GetControllerOf(obj)
			return ref != nil && ref.Kind == "App" && ref.Name == b.app.Name, nil
		})
		t.Logf("App %s got its own %s %s after the blockers were deleted", b.app.Name, b.kind, time.Since(deleted).Round(time.Millisecond))
	}
	for _, b := range blockers {
		e.waitConverged(b.app.Name)
	}
}

// A child that loses the managed-by label (someone edited it away) leaves
// the selected cache; the App finds it again by its Create's AlreadyExists,
// sees it controls it, and puts the label back: the same object, not a
// blocker.
func TestChildThatLostTheManagedByLabelIsRelabelled(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	e.create(newApp("relabel", true, false))
	e.waitConverged("relabel")
	before, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "relabel", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"` + controller.ManagedByLabel + `":null}}}`)
	if _, err := e.kube.AppsV1().Deployments(e.ns).Patch(ctx, "relabel", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, unblockedWithin, "the Deployment labelled again", func(ctx context.Context) (bool, error) {
		d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "relabel", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.UID != before.UID {
			t.Fatalf("the Deployment was replaced: uid %s, was %s", d.UID, before.UID)
		}
		return d.Labels[controller.ManagedByLabel] == controller.ManagedByValue, nil
	})
	app := e.waitConverged("relabel")
	if c := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("App Degraded by its own child: %s", c.Message)
	}
}
