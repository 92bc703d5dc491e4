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
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
)

// writes counts the manager's writes to the test's namespace whose path
// has part in it. Managers of earlier tests may still reconcile Apps in
// their namespaces, being deleted.
func (e *env) writes(part string) (n int, summary string) {
	for request, count := range e.m.Writes.ByRequest() {
		if strings.Contains(request, "/namespaces/"+e.ns+"/") && strings.Contains(request, part) {
			n += count
			summary += fmt.Sprintf("%d× %s\n", count, request)
		}
	}
	return n, summary
}

// An App that leaves replicas unset leaves the Deployment's replicas to
// others: an HPA on the Deployment (kube-controller-manager, through the
// Deployment's scale subresource) scales it, and the App controller
// neither undoes it nor writes the Deployment again when the App changes.
func TestReplicasUnsetNotOwned(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.startManager()
	e.create(&appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa"},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27"},
	})
	e.waitApp("hpa", "ready", ready)
	e.waitQuiet()

	scale := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: e.ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 4},
	}
	if _, err := e.kube.AppsV1().Deployments(e.ns).UpdateScale(ctx, "hpa", scale,
		metav1.UpdateOptions{FieldManager: "kube-controller-manager"}); err != nil {
		t.Fatalf("scaling the Deployment as the HPA controller does: %v", err)
	}
	before, _ := e.writes("/deployments/")

	// A change of the App that does not concern the Deployment.
	e.patchSpec("hpa", `{"enable_service":true}`)
	app := e.waitApp("hpa", "ready with the Service", func(a *appv1beta1.App) bool {
		return ready(a) && a.Spec.EnableService
	})
	e.waitQuiet()

	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "hpa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 4 {
		t.Errorf("Deployment replicas = %d, want the 4 the HPA set", got)
	}
	if after, summary := e.writes("/deployments/"); after != before {
		t.Errorf("the manager wrote the Deployment %d more times after the HPA scaled it:\n%s", after-before, summary)
	}
	for _, f := range d.ManagedFields {
		if f.Manager == "ndsl-controller-manager" && f.FieldsV1 != nil && strings.Contains(string(f.FieldsV1.Raw), `"f:replicas"`) {
			t.Errorf("the manager owns the Deployment's spec.replicas: %s", f.FieldsV1.Raw)
		}
	}
	if app.Spec.Replicas != nil {
		t.Errorf("App spec.replicas = %d, want unset (no default)", *app.Spec.Replicas)
	}
	e.waitApp("hpa", "4 replicas ready", func(a *appv1beta1.App) bool {
		return ready(a) && a.Status.Replicas == 4 && a.Status.AvailableReplicas == 4
	})
}
