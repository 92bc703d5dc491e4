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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/ndsl/controller-manager/test/integration/framework"
)

// serviceAccountWithAppRole returns a client config for a ServiceAccount
// bound to nothing but the App controller's ClusterRole from manifests/.
func serviceAccountWithAppRole(t *testing.T) func(ns string) *rest.Config {
	return func(ns string) *rest.Config {
		return framework.ServiceAccountWithClusterRoles(t, cp, ns, "rbac/controllers/app.yaml")
	}
}

// The shipped ClusterRole is enough for everything the controller does:
// watch, create, repair with apply and patch, delete, write status and
// events.
func TestShippedRBACSuffices(t *testing.T) {
	e := setup(t, serviceAccountWithAppRole(t))
	ctx := context.Background()
	framework.Eventually(t, timeout, "/readyz/informer-sync with the ServiceAccount's permissions", func(context.Context) (bool, error) {
		status, _, err := e.m.Get("/readyz/informer-sync")
		return status == 200, err
	})

	e.create(newApp("rbac", true, true))
	e.waitConverged("rbac") // created three children, wrote status

	// Repaired, after a JSON patch moving each child's creation fields to
	// the controller's apply, with server-side apply (image, target port). The Deployment controller writes the Deployment
	// too: retry the hand edit on conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "rbac", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "evil:1"
		_, err = e.kube.AppsV1().Deployments(e.ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "rbac", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(9999)
	if _, err := e.kube.CoreV1().Services(e.ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "both repairs", func(ctx context.Context) (bool, error) {
		d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "rbac", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "rbac", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" &&
			len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == 80 && svc.Spec.Ports[0].TargetPort == intstr.FromInt32(80), nil
	})

	// Deletes.
	e.patchSpec("rbac", `{"enable_ingress":false}`)
	e.waitGone("the Ingress", func(ctx context.Context) error {
		_, err := e.kube.NetworkingV1().Ingresses(e.ns).Get(ctx, "rbac", metav1.GetOptions{})
		return err
	})
	e.waitEventMessage("rbac", corev1.EventTypeNormal, "Deleted", "Deleted Ingress: the App no longer asks for it")
	e.waitConverged("rbac")
}
