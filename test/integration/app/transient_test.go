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
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A conflict says only that the cache was behind: it is retried, and never
// shows in status (Degraded) or as a Warning event, so status does not flap
// (issue 12, defect 5). The first creates of the App's Deployment and
// Service get the API server's 409.
func TestConflictsNeverReachStatusOrWarnings(t *testing.T) {
	const name, conflicts = "flaky", 2
	var injector *framework.ConflictInjector
	e := setup(t, func(ns string) *rest.Config {
		cfg, inj := framework.InjectConflicts(cp.Config, 2*conflicts, func(req *http.Request) bool {
			return framework.IsCreateOf("/namespaces/"+ns+"/deployments")(req) ||
				framework.IsCreateOf("/namespaces/"+ns+"/services")(req)
		})
		injector = inj
		return cfg
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := e.apps.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	e.create(newApp(name, true, false))
	app := e.waitConverged(name)
	if got := injector.Injected(); got != 2*conflicts {
		t.Fatalf("%d conflicts injected, want %d", got, 2*conflicts)
	}

	// Every version of the App up to convergence, as the watch saw it.
	for done := false; !done; {
		ev := <-w.ResultChan()
		a, ok := ev.Object.(*appv1beta1.App)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		if c := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("resourceVersion %s: Degraded=True %s %q", a.ResourceVersion, c.Reason, c.Message)
		}
		done = a.ResourceVersion == app.ResourceVersion
	}
	events, err := e.kube.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.kind": "App", "involvedObject.name": name, "type": corev1.EventTypeWarning,
	}).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		t.Errorf("Warning event %s: %s", ev.Reason, ev.Message)
	}
}

// While a child's write keeps failing with a conflict, the App's status
// does not claim the new generation: observedGeneration is what clients
// wait on, and a status written beside the failed write told them the new
// spec was in place while the Deployment still had the old port. Once the
// write goes through, the status follows.
func TestStatusWaitsForAChildWriteThatConflicted(t *testing.T) {
	const name = "retried"
	var injector *framework.ConflictInjector
	e := setup(t, func(ns string) *rest.Config {
		cfg, inj := framework.InjectConflicts(cp.Config, 0, func(req *http.Request) bool {
			return (req.Method == http.MethodPatch || req.Method == http.MethodPut) &&
				strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/deployments/"+name)
		})
		injector = inj
		return cfg
	})
	e.create(newApp(name, true, false))
	e.waitConverged(name)

	injector.Arm(1000)
	e.patchSpec(name, `{"port":8080}`)
	framework.Eventually(t, timeout, "the Deployment's write to conflict and be retried", func(context.Context) (bool, error) {
		return injector.Injected() >= 3, nil
	})
	app, err := e.apps.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if app.Status.ObservedGeneration == app.Generation {
		t.Errorf("status claims generation %d while every write of its Deployment got a conflict (%d so far): %+v",
			app.Generation, injector.Injected(), app.Status.Conditions)
	}

	injector.Stop()
	e.waitApp(name, "converged on port 8080", func(a *appv1beta1.App) bool { return a.Generation == 2 && converged(a) })
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Spec.Template.Spec.Containers[0].Ports; len(p) != 1 || p[0].ContainerPort != 8080 {
		t.Errorf("container ports = %+v, want only 8080", p)
	}
}
