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
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	appclient "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/typed/app/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	timeout = time.Minute
	domain  = "apps.example.com"
	class   = "nginx"
)

// env is one test's namespace, clients and manager.
type env struct {
	t    *testing.T
	ns   string
	kube kubernetes.Interface
	apps appclient.AppInterface
	m    *framework.Manager
}

// setup installs the CRDs, creates a namespace (deleted when the test ends)
// and runs a manager with only the App controller, talking to the API
// server with managerConfig.
func setup(t *testing.T, managerConfig func(ns string) *rest.Config) *env {
	t.Helper()
	return setupWith(t, managerConfig, nil)
}

// setupWith is setup with mutate changing the manager's options further.
func setupWith(t *testing.T, managerConfig func(ns string) *rest.Config, mutate func(*options.Options)) *env {
	t.Helper()
	framework.RequireCRDs(t, cp.Config)
	ns := framework.CreateNamespace(t, cp.Client)
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	typed, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cp.Config
	if managerConfig != nil {
		cfg = managerConfig(ns)
	}
	m := framework.StartManager(t, cfg, func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName}
		o.App.IngressDomain = domain
		o.App.IngressClass = class
		if mutate != nil {
			mutate(o)
		}
	})
	return &env{t: t, ns: ns, kube: cp.Client, apps: typed.AppV1beta1().Apps(ns), m: m}
}

func newApp(name string, service, ingress bool) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appv1beta1.AppSpec{
			Image:         "nginx:1.27",
			Replicas:      ptr.To[int32](2),
			EnableService: service,
			EnableIngress: ingress,
		},
	}
}

func (e *env) create(app *appv1beta1.App) *appv1beta1.App {
	e.t.Helper()
	created, err := e.apps.Create(context.Background(), app, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating App %s: %v", app.Name, err)
	}
	return created
}

// patchSpec merge-patches the App's spec.
func (e *env) patchSpec(name, spec string) {
	e.t.Helper()
	if _, err := e.apps.Patch(context.Background(), name, types.MergePatchType, []byte(`{"spec":`+spec+`}`), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("patching App %s with %s: %v", name, spec, err)
	}
}

// waitApp waits until the App satisfies cond and returns it.
func (e *env) waitApp(name, what string, cond func(*appv1beta1.App) bool) *appv1beta1.App {
	e.t.Helper()
	var app *appv1beta1.App
	framework.Eventually(e.t, timeout, fmt.Sprintf("App %s: %s", name, what), func(ctx context.Context) (bool, error) {
		var err error
		app, err = e.apps.Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(app), err
	})
	return app
}

// converged holds when the App's status describes its latest spec, every
// child it asks for exists and nothing is in the way. Ready stays False:
// without a scheduler no pod ever runs.
func converged(app *appv1beta1.App) bool {
	degraded := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionDegraded)
	ready := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionReady)
	return app.Status.ObservedGeneration == app.Generation &&
		degraded != nil && degraded.Status == metav1.ConditionFalse &&
		ready != nil && ready.Reason != appv1beta1.ReasonResourceMissing
}

func (e *env) waitConverged(name string) *appv1beta1.App {
	e.t.Helper()
	return e.waitApp(name, "converged", converged)
}

// waitGone waits until get reports NotFound.
func (e *env) waitGone(what string, get func(ctx context.Context) error) {
	e.t.Helper()
	framework.Eventually(e.t, timeout, what+" to be gone", func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// waitEvent waits for an event of this type and reason about the App.
func (e *env) waitEvent(app, eventType, reason string) *corev1.Event {
	e.t.Helper()
	var event *corev1.Event
	framework.Eventually(e.t, timeout, fmt.Sprintf("a %s event %s about App %s", eventType, reason, app), func(ctx context.Context) (bool, error) {
		events, err := e.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
			"involvedObject.kind": "App", "involvedObject.name": app, "reason": reason, "type": eventType,
		}).String()})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		event = &events.Items[0]
		return true, nil
	})
	return event
}

// waitEventMessage waits for an event about app with this type, reason and
// message.
func (e *env) waitEventMessage(app, eventType, reason, message string) {
	e.t.Helper()
	framework.Eventually(e.t, timeout, fmt.Sprintf("a %s event %s %q about App %s", eventType, reason, message, app), func(ctx context.Context) (bool, error) {
		events, err := e.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
			"involvedObject.kind": "App", "involvedObject.name": app, "reason": reason, "type": eventType,
		}).String()})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Message == message {
				return true, nil
			}
		}
		return false, nil
	})
}

// checkControlled fails unless obj is controlled by app.
func checkControlled(t *testing.T, obj metav1.Object, app *appv1beta1.App) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != app.UID || ref.Kind != "App" || ref.APIVersion != "ingress.example.com/v1" {
		t.Errorf("%s: controller reference = %+v, want App %s (%s)", obj.GetName(), ref, app.Name, app.UID)
	}
	if v, ok := obj.GetLabels()["app.kubernetes.io/instance"]; ok {
		t.Errorf("%s: carries app.kubernetes.io/instance=%s, Helm's and Argo CD's label", obj.GetName(), v)
	}
	for k, v := range map[string]string{
		appcontroller.NameLabel:   app.Name,
		appcontroller.AppLabel:    app.Name,
		controller.ManagedByLabel: controller.ManagedByValue,
	} {
		if obj.GetLabels()[k] != v {
			t.Errorf("%s: label %s = %q, want %q", obj.GetName(), k, obj.GetLabels()[k], v)
		}
	}
}
