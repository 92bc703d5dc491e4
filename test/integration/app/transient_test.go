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
