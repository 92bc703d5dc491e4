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
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const timeout = 30 * time.Second

func annotatedService(ns, name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": name},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 8080}, {Name: "admin", Port: 9090}},
		},
	}
}

func withDefaults(o *options.Options) {
	o.Generic.Controllers = []string{ingress.ControllerName}
	o.Ingress.DefaultDomain = "apps.example.com"
	o.Ingress.DefaultClass = "nginx"
}

func TestIngressFollowsTheAnnotation(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	framework.StartManager(t, cp.Config, withDefaults)
	ingresses := client.NetworkingV1().Ingresses(ns)

	svc, err := client.CoreV1().Services(ns).Create(ctx,
		annotatedService(ns, "web", map[string]string{ingress.AnnotationEnabled: "true"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var ing *networkingv1.Ingress
	framework.Eventually(t, timeout, "the Ingress to appear", func(ctx context.Context) (bool, error) {
		ing, err = ingresses.Get(ctx, "web", metav1.GetOptions{})
		return err == nil, err
	})
	ref := metav1.GetControllerOf(ing)
	if ref == nil || ref.UID != svc.UID || ref.Kind != "Service" || ref.APIVersion != "v1" {
		t.Fatalf("controller owner = %+v, want Service web (%s)", ref, svc.UID)
	}
	if got := ing.Spec.Rules[0].Host; got != "web."+ns+".apps.example.com" {
		t.Errorf("host = %q", got)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
		t.Errorf("class = %v, want nginx", ing.Spec.IngressClassName)
	}
	path := ing.Spec.Rules[0].HTTP.Paths[0]
	if path.Path != "/" || *path.PathType != networkingv1.PathTypePrefix ||
		path.Backend.Service.Name != "web" || path.Backend.Service.Port.Number != 8080 {
		t.Errorf("path = %+v, want / Prefix -> web:8080", path)
	}

	// A hand edit of a field the controller sets is put back; a label it
	// does not set survives.
	ing.Spec.Rules[0].Host = "hand.edited"
	ing.Labels["team"] = "shop"
	if _, err := ingresses.Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the host to be put back", func(ctx context.Context) (bool, error) {
		ing, err = ingresses.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && ing.Spec.Rules[0].Host == "web."+ns+".apps.example.com", err
	})
	if ing.Labels["team"] != "shop" {
		t.Errorf("a label the controller does not own was removed: %v", ing.Labels)
	}

	// Deleted by hand: it comes back, as a new object.
	oldUID := ing.UID
	if err := ingresses.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Ingress to be recreated", func(ctx context.Context) (bool, error) {
		ing, err = ingresses.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && ing.UID != oldUID, nil
	})

	// Annotations change the Ingress.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"shop.test",%q:"Exact",%q:"web-tls"}}}`,
		ingress.AnnotationHost, ingress.AnnotationPathType, ingress.AnnotationTLSSecret)
	if _, err := client.CoreV1().Services(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "host, path type and TLS from annotations", func(ctx context.Context) (bool, error) {
		ing, err = ingresses.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r := ing.Spec.Rules[0]
		return r.Host == "shop.test" && *r.HTTP.Paths[0].PathType == networkingv1.PathTypeExact &&
			len(ing.Spec.TLS) == 1 && ing.Spec.TLS[0].SecretName == "web-tls" && ing.Spec.TLS[0].Hosts[0] == "shop.test", nil
	})

	// "false" counts as removed: the Ingress goes.
	patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"false"}}}`, ingress.AnnotationEnabled)
	if _, err := client.CoreV1().Services(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Ingress to be deleted", func(ctx context.Context) (bool, error) {
		_, err := ingresses.Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestUnownedIngressIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	framework.StartManager(t, cp.Config, withDefaults)

	prefix := networkingv1.PathTypePrefix
	theirs := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Labels: map[string]string{"owner": "someone-else"}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "legacy.example.org",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "other", Port: networkingv1.ServiceBackendPort{Number: 1}}},
			}}}},
		}}},
	}
	theirs, err := client.NetworkingV1().Ingresses(ns).Create(ctx, theirs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx,
		annotatedService(ns, "legacy", map[string]string{ingress.AnnotationEnabled: ""}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	framework.Eventually(t, timeout, "a Warning event about the conflict", func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
			"involvedObject.kind": "Service", "involvedObject.name": "legacy", "reason": "IngressConflict", "type": corev1.EventTypeWarning,
		}).String()})
		return err == nil && len(events.Items) > 0, err
	})

	// Removing the annotation must not delete what is not ours either.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, ingress.AnnotationEnabled)
	if _, err := client.CoreV1().Services(ns).Patch(ctx, "legacy", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait until the controller has seen the change: a new Service that
	// asks for an Ingress converges after it (one queue, in order of events).
	if _, err := client.CoreV1().Services(ns).Create(ctx,
		annotatedService(ns, "marker", map[string]string{ingress.AnnotationEnabled: "true"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the marker Ingress", func(ctx context.Context) (bool, error) {
		_, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "marker", metav1.GetOptions{})
		return err == nil, err
	})

	got, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the unowned Ingress is gone: %v", err)
	}
	if got.ResourceVersion != theirs.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("the unowned Ingress was modified: resourceVersion %s -> %s, owners %v",
			theirs.ResourceVersion, got.ResourceVersion, got.OwnerReferences)
	}
}

// Converging costs one create per Service's Ingress, with no read from the
// API server; resyncs of converged Services write nothing.
func TestResyncOfConvergedServicesWritesNothing(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	const n = 20
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		withDefaults(o)
		o.Generic.MinResyncPeriod = time.Second // resync every 1-2 s
	})

	for i := range n {
		if _, err := client.CoreV1().Services(ns).Create(ctx,
			annotatedService(ns, fmt.Sprintf("svc-%d", i), map[string]string{ingress.AnnotationEnabled: "true"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, timeout, "all Ingresses", func(ctx context.Context) (bool, error) {
		list, err := client.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{
			LabelSelector: controller.ManagedByLabel + "=" + controller.ManagedByValue})
		return err == nil && len(list.Items) == n, err
	})
	// Converged: the queue is empty and the creates' events, which the
	// recorder sends asynchronously, have all arrived. Only then count.
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) {
		return m.QueuesEmpty()
	})
	framework.Eventually(t, timeout, "every CreatedIngress event", func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "CreatedIngress").String()})
		return err == nil && len(events.Items) == n, err
	})
	// One create per Service, and no read of an Ingress from the API server.
	ingressWrites, ingressReads := 0, 0
	for request, count := range m.Writes.ByRequest() {
		if strings.Contains(request, "/namespaces/"+ns+"/ingresses") {
			ingressWrites += count
		}
	}
	for path, count := range m.Writes.Reads() {
		if strings.Contains(path, "/namespaces/"+ns+"/ingresses/") {
			ingressReads += count
		}
	}
	if ingressWrites != n || ingressReads != 0 {
		t.Errorf("converging %d Services: %d Ingress writes, %d Ingress reads; want %d and 0", n, ingressWrites, ingressReads, n)
	}
	writesBefore := m.Writes.Total()
	reconcilesBefore := framework.ReconcileCount(t, ingress.ControllerName)

	// At least two full resyncs of every Service.
	framework.Eventually(t, timeout, "two rounds of resync", func(context.Context) (bool, error) {
		return framework.ReconcileCount(t, ingress.ControllerName)-reconcilesBefore >= 2*n, nil
	})
	if extra := m.Writes.Total() - writesBefore; extra != 0 {
		t.Fatalf("resync of converged Services made %d write requests:\n%s", extra, m.Writes.Summary())
	}
}

// A Service kept from its Ingress by a same-name Ingress it does not control
// is retried until its budget is spent and its key dropped. The blocker
// going away later must still bring it its Ingress at once, not at the next
// resync 12-24 h later (issue 12, defect 2).
func TestBlockerGoneAfterTheRetryBudgetUnblocksTheService(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	framework.StartManager(t, cp.Config, func(o *options.Options) {
		withDefaults(o)
		o.Ingress.MaxRetries = 2
	})
	theirs := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocked", Labels: map[string]string{"owner": "someone-else"}},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "other", Port: networkingv1.ServiceBackendPort{Number: 1}},
		}},
	}
	if _, err := client.NetworkingV1().Ingresses(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx,
		annotatedService(ns, "blocked", map[string]string{ingress.AnnotationEnabled: "true"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"IngressConflict", "ReconcileFailed"} { // blocked, then the key dropped
		framework.Eventually(t, timeout, "a Warning event "+reason, func(ctx context.Context) (bool, error) {
			events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
				"involvedObject.kind": "Service", "involvedObject.name": "blocked", "reason": reason, "type": corev1.EventTypeWarning,
			}).String()})
			return err == nil && len(events.Items) > 0, err
		})
	}

	if err := client.NetworkingV1().Ingresses(ns).Delete(ctx, "blocked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	framework.Eventually(t, 20*time.Second, "the Service's own Ingress", func(ctx context.Context) (bool, error) {
		ing, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "blocked", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return metav1.IsControlledBy(ing, svc), nil
	})
	t.Logf("the Service got its own Ingress %s after the blocker was deleted", time.Since(deleted).Round(time.Millisecond))
}
