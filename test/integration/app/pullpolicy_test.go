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
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// spec.imagePullPolicy reaches the Deployment's container, follows the App
// when changed, goes back to the server's default when unset without the
// manager writing the Deployment again and again, and the API server
// refuses a value outside the enum, naming the field.
func TestImagePullPolicy(t *testing.T) {
	// Resyncs every 1-2 s reconcile the App again and again: the check that
	// an unset policy costs no writes needs them.
	e := setupWith(t, nil, func(o *options.Options) { o.Generic.MinResyncPeriod = time.Second })
	ctx := context.Background()

	// An image loaded into the nodes under :latest, which the server would
	// otherwise pull Always.
	app := newApp("web", false, false)
	app.Spec.Image = "example.com/web:latest"
	app.Spec.ImagePullPolicy = corev1.PullIfNotPresent
	e.create(app)
	e.waitPullPolicy("web", corev1.PullIfNotPresent)

	e.patchSpec("web", `{"imagePullPolicy":"Never"}`)
	d := e.waitPullPolicy("web", corev1.PullNever)
	if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 || cs[0].Image != "example.com/web:latest" {
		t.Errorf("containers = %+v, want one running example.com/web:latest", cs)
	}

	// Values outside the enum, on update and on create, are refused by the
	// schema with the field's name and the values it takes.
	_, err := e.apps.Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"imagePullPolicy":"Sometimes"}}`), metav1.PatchOptions{})
	checkUnsupportedPullPolicy(t, err, "Sometimes")
	bad := newApp("bad", false, false)
	bad.Spec.ImagePullPolicy = "ifnotpresent"
	_, err = e.apps.Create(ctx, bad, metav1.CreateOptions{})
	checkUnsupportedPullPolicy(t, err, "ifnotpresent")
	if got, err := e.apps.Get(ctx, "web", metav1.GetOptions{}); err != nil || got.Spec.ImagePullPolicy != corev1.PullNever {
		t.Fatalf("after the refused update: App %v, err %v; want imagePullPolicy Never still", got, err)
	}

	// Unset, the manager stops setting the field and the server defaults it
	// again: Always, for :latest.
	e.patchSpec("web", `{"imagePullPolicy":null}`)
	e.waitApp("web", "converged without a pull policy", func(a *appv1beta1.App) bool {
		return a.Spec.ImagePullPolicy == "" && converged(a)
	})
	d = e.waitPullPolicy("web", corev1.PullAlways)

	// Then resyncs reconcile the App again and again, and write nothing to
	// its Deployment: the server's default is not taken for drift.
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) {
		return e.m.QueuesEmpty()
	})
	writesBefore := deploymentWrites(e.m, e.ns)
	reconcilesBefore := framework.ReconcileCount(t, appcontroller.ControllerName)
	framework.Eventually(t, timeout, "six more reconciles", func(context.Context) (bool, error) {
		return framework.ReconcileCount(t, appcontroller.ControllerName)-reconcilesBefore >= 6, nil
	})
	if extra := deploymentWrites(e.m, e.ns) - writesBefore; extra != 0 {
		t.Errorf("resyncs of the App without a pull policy wrote its Deployment %d times; all writes:\n%s", extra, e.m.Writes.Summary())
	}
	after, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != d.Generation || after.Spec.Template.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("Deployment generation %d -> %d, pull policy %q; want unchanged, Always",
			d.Generation, after.Generation, after.Spec.Template.Spec.Containers[0].ImagePullPolicy)
	}
}

// waitPullPolicy waits until the App's Deployment has one container, with
// this pull policy, and returns the Deployment.
func (e *env) waitPullPolicy(name string, want corev1.PullPolicy) *appsv1.Deployment {
	e.t.Helper()
	var d *appsv1.Deployment
	framework.Eventually(e.t, timeout, fmt.Sprintf("Deployment %s with imagePullPolicy %s", name, want), func(ctx context.Context) (bool, error) {
		var err error
		d, err = e.kube.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		cs := d.Spec.Template.Spec.Containers
		return err == nil && len(cs) == 1 && cs[0].ImagePullPolicy == want, err
	})
	return d
}

// checkUnsupportedPullPolicy fails unless err is the schema refusing value
// for spec.imagePullPolicy.
func checkUnsupportedPullPolicy(t *testing.T, err error, value string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("imagePullPolicy %q: err = %v, want Invalid", value, err)
	}
	for _, want := range []string{"spec.imagePullPolicy", fmt.Sprintf("Unsupported value: %q", value), `"Always", "IfNotPresent", "Never"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("imagePullPolicy %q: error %q does not contain %q", value, err, want)
		}
	}
}

// deploymentWrites counts the manager's writes to the Deployments of ns.
func deploymentWrites(m *framework.Manager, ns string) int {
	n := 0
	for request, count := range m.Writes.ByRequest() {
		// Only ns's: the manager also reconciles the Apps of earlier tests,
		// whose namespaces are still terminating, and counts its refused
		// creates of their Deployments.
		if strings.Contains(request, "/namespaces/"+ns+"/deployments") {
			n += count
		}
	}
	return n
}
