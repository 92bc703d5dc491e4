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

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// An Ingress without a host catches every request no other Ingress of its
// class matches. Without --app-ingress-domain an App's Ingress has no host:
// it is refused, the App says why, once, and a hostless Ingress an earlier
// version made is deleted.
func TestIngressWithoutADomainIsRefused(t *testing.T) {
	ctx := context.Background()
	noDomain := func(o *options.Options) {
		o.App.IngressDomain = ""
		o.Generic.MinResyncPeriod = time.Second // resync every 1-2 s
	}
	e := setupWith(t, nil, noDomain)
	// The earlier version's world, made while no manager runs.
	if err := e.m.Stop(); err != nil {
		t.Fatal(err)
	}
	app := e.create(newApp("nohost", true, true))
	prefix := networkingv1.PathTypePrefix
	hostless := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "nohost",
			Labels: map[string]string{appcontroller.NameLabel: "nohost", appcontroller.AppLabel: "nohost", controller.ManagedByLabel: controller.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: appv1beta1.SchemeGroupVersion.String(), Kind: "App", Name: "nohost", UID: app.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "nohost", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}},
		}}},
	}
	if _, err := e.kube.NetworkingV1().Ingresses(e.ns).Create(ctx, hostless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName}
		noDomain(o)
	})
	e.waitGone("the hostless Ingress", func(ctx context.Context) error {
		_, err := e.kube.NetworkingV1().Ingresses(e.ns).Get(ctx, "nohost", metav1.GetOptions{})
		return err
	})
	refused := e.waitApp("nohost", "Ready=False and Degraded=True with reason IngressHostRequired", func(a *appv1beta1.App) bool {
		ready := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionReady)
		degraded := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionDegraded)
		return a.Status.ObservedGeneration == a.Generation &&
			ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == appv1beta1.ReasonIngressHostRequired &&
			degraded != nil && degraded.Status == metav1.ConditionTrue && degraded.Reason == appv1beta1.ReasonIngressHostRequired
	})
	degraded := meta.FindStatusCondition(refused.Status.Conditions, appv1beta1.ConditionDegraded)
	if !strings.Contains(degraded.Message, "--app-ingress-domain") {
		t.Errorf("Degraded message %q does not say how to give the App a host", degraded.Message)
	}
	if refused.Status.URL != "" {
		t.Errorf("status.url = %q, want none", refused.Status.URL)
	}
	e.waitEvent("nohost", corev1.EventTypeWarning, appv1beta1.ReasonIngressHostRequired)

	// Resyncs neither bring the Ingress back nor repeat the Warning.
	reconciles := framework.ReconcileCount(t, appcontroller.ControllerName)
	framework.Eventually(t, timeout, "two resyncs", func(context.Context) (bool, error) {
		return framework.ReconcileCount(t, appcontroller.ControllerName)-reconciles >= 2, nil
	})
	events, err := e.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": "nohost", "reason": appv1beta1.ReasonIngressHostRequired}).String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 || events.Items[0].Count > 1 {
		t.Errorf("IngressHostRequired events %+v, want one, once", events.Items)
	}
	if _, err := e.kube.NetworkingV1().Ingresses(e.ns).Get(ctx, "nohost", metav1.GetOptions{}); err == nil {
		t.Error("the hostless Ingress came back")
	}
}
