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

package ingress

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// waitWarning waits for a Warning event with this reason about the Service
// and returns its message.
func waitWarning(t *testing.T, ns, service, reason string) string {
	t.Helper()
	var message string
	framework.Eventually(t, timeout, fmt.Sprintf("a Warning event %s about Service %s", reason, service), func(ctx context.Context) (bool, error) {
		events, err := cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
			"involvedObject.kind": "Service", "involvedObject.name": service, "reason": reason, "type": corev1.EventTypeWarning,
		}).String()})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		message = events.Items[0].Message
		return true, nil
	})
	return message
}

func waitIngress(t *testing.T, ns, name string) *networkingv1.Ingress {
	t.Helper()
	var ing *networkingv1.Ingress
	framework.Eventually(t, timeout, "the Ingress "+name, func(ctx context.Context) (bool, error) {
		var err error
		ing, err = cp.Client.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	return ing
}

func waitNoIngress(t *testing.T, ns, name string) {
	t.Helper()
	framework.Eventually(t, timeout, "no Ingress "+name, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func createService(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	created, err := cp.Client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func annotate(t *testing.T, ns, name, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if _, err := cp.Client.CoreV1().Services(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// An ExternalName Service points outside the namespace (another team's
// Service, an outside host): an Ingress to it would route there. Refused,
// and the Ingress made while it was a plain Service is deleted.
func TestExternalNameServiceIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	framework.StartManager(t, cp.Config, withDefaults)

	external := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "outside", Annotations: map[string]string{ingress.AnnotationEnabled: "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.other-team.svc.cluster.local",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	createService(t, external)
	if msg := waitWarning(t, ns, "outside", "ExternalNameService"); !strings.Contains(msg, "db.other-team.svc.cluster.local") {
		t.Errorf("the Warning does not say where the Service points: %q", msg)
	}

	// A Service that becomes ExternalName loses the Ingress it had.
	svc := createService(t, annotatedService(ns, "web", map[string]string{ingress.AnnotationEnabled: "true"}))
	waitIngress(t, ns, "web")
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org", Ports: svc.Spec.Ports}
	if _, err := cp.Client.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitWarning(t, ns, "web", "ExternalNameService")
	waitNoIngress(t, ns, "web")
	if _, err := cp.Client.NetworkingV1().Ingresses(ns).Get(ctx, "outside", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ExternalName Service got an Ingress (%v)", err)
	}
}

// --ingress-allowed-hosts bounds the hosts, wildcards only under a "*."
// entry; a Service moved outside loses its Ingress.
func TestHostsOutsideTheAllowedHostsAreRefused(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	framework.StartManager(t, cp.Config, func(o *options.Options) {
		withDefaults(o)
		o.Ingress.AllowedHosts = []string{"apps.example.com", "*.wild.example.com"}
	})
	host := func(h string) map[string]string {
		return map[string]string{ingress.AnnotationEnabled: "true", ingress.AnnotationHost: h}
	}
	createService(t, annotatedService(ns, "default-host", map[string]string{ingress.AnnotationEnabled: "true"}))
	createService(t, annotatedService(ns, "under", host("shop.apps.example.com")))
	createService(t, annotatedService(ns, "wild-under", host("*.team.wild.example.com")))
	createService(t, annotatedService(ns, "outside", host("login.bank.example.org")))
	createService(t, annotatedService(ns, "lookalike", host("evilapps.example.com")))
	createService(t, annotatedService(ns, "wild", host("*.apps.example.com")))

	for _, name := range []string{"default-host", "under", "wild-under"} {
		waitIngress(t, ns, name)
	}
	for name, want := range map[string]string{
		"outside":   `host "login.bank.example.org" is not allowed`,
		"lookalike": `host "evilapps.example.com" is not allowed`,
		"wild":      `wildcard host "*.apps.example.com" is not allowed`,
	} {
		if msg := waitWarning(t, ns, name, "IngressHostNotAllowed"); !strings.Contains(msg, want) || !strings.Contains(msg, "--ingress-allowed-hosts") {
			t.Errorf("Service %s: Warning %q, want it to contain %q and name the flag", name, msg, want)
		}
		waitNoIngress(t, ns, name)
	}

	// Moved outside: the Ingress goes.
	annotate(t, ns, "under", ingress.AnnotationHost, "shop.example.net")
	waitWarning(t, ns, "under", "IngressHostNotAllowed")
	waitNoIngress(t, ns, "under")
}

// An Ingress without a host catches every request no other Ingress of its
// class matches. Without ingress/host nor --ingress-default-domain the
// Service is refused, and a hostless Ingress made by an earlier version is
// deleted.
func TestServiceWithoutAHostIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	svc := createService(t, annotatedService(ns, "web", map[string]string{ingress.AnnotationEnabled: "true"}))
	// What an earlier version made of it: a hostless Ingress it controls.
	prefix := networkingv1.PathTypePrefix
	hostless := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
			Labels: map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 8080}}},
			}}}},
		}}},
	}
	if _, err := cp.Client.NetworkingV1().Ingresses(ns).Create(ctx, hostless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.StartManager(t, cp.Config, func(o *options.Options) {
		withDefaults(o)
		o.Ingress.DefaultDomain = ""
	})
	if msg := waitWarning(t, ns, "web", "IngressHostRequired"); !strings.Contains(msg, "--ingress-default-domain") {
		t.Errorf("the Warning does not say how to give a host: %q", msg)
	}
	waitNoIngress(t, ns, "web")

	// With a host it is served.
	annotate(t, ns, "web", ingress.AnnotationHost, "web.example.com")
	if ing := waitIngress(t, ns, "web"); ing.Spec.Rules[0].Host != "web.example.com" {
		t.Errorf("host = %q, want web.example.com", ing.Spec.Rules[0].Host)
	}
}
