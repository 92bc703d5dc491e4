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

package appcoexist

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	appclient "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/typed/app/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const timeout = 2 * time.Minute

// env is one test's namespace and clients; m is its manager once started.
type env struct {
	t     *testing.T
	ns    string
	kube  kubernetes.Interface
	typed versioned.Interface
	apps  appclient.AppInterface
	m     *framework.Manager
}

// newEnv installs nothing more than TestMain did and makes a namespace,
// deleted when the test ends; the manager is started by startManager.
func newEnv(t *testing.T) *env {
	t.Helper()
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	ns := framework.CreateNamespace(t, cp.Client)
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	typed, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ns: ns, kube: cp.Client, typed: typed, apps: typed.AppV1beta1().Apps(ns)}
}

// startManager runs a manager with only the App controller, counting its
// writes, and waits until it is ready.
func (e *env) startManager() {
	e.t.Helper()
	e.startManagerAs(cp.Config)
}

// startManagerAs is startManager talking to the API server with cfg.
func (e *env) startManagerAs(cfg *rest.Config) {
	e.t.Helper()
	e.m = framework.StartManager(e.t, cfg, func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName}
	})
	framework.Eventually(e.t, timeout, "the manager to be ready", func(context.Context) (bool, error) {
		status, _, err := e.m.Get("/readyz/informer-sync")
		return status == 200, err
	})
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

// ready holds when the App's status describes its latest spec, all its
// replicas are available and nothing is in the way.
func ready(app *appv1beta1.App) bool {
	r := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionReady)
	d := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionDegraded)
	return app.Status.ObservedGeneration == app.Generation &&
		r != nil && r.Status == metav1.ConditionTrue && d != nil && d.Status == metav1.ConditionFalse
}

// waitQuiet waits until the manager's queues are empty.
func (e *env) waitQuiet() {
	e.t.Helper()
	framework.Eventually(e.t, timeout, "the manager's queues to be empty", func(context.Context) (bool, error) {
		return e.m.QueuesEmpty()
	})
}

// endpoints returns the ready endpoints of the Service's EndpointSlices,
// as the pods they point to, and how many there are.
func (e *env) endpoints(ctx context.Context, service string) (pods []string, readyCount int, err error) {
	slices, err := e.kube.DiscoveryV1().EndpointSlices(e.ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service,
	})
	if err != nil {
		return nil, 0, err
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				continue
			}
			readyCount++
			if ep.TargetRef != nil {
				pods = append(pods, ep.TargetRef.Name)
			}
		}
	}
	return pods, readyCount, nil
}

// podReady reports whether the pod is Running and Ready.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
