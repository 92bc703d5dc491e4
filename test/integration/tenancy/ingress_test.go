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

package tenancy

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/controllers/ingress"
)

// Issue 35, "Ingress": what team B annotates or asks of an App must not
// expose another namespace's service, claim every host under a domain or
// catch every unmatched request.
func TestIngressExposure(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	// annotated creates a Service of B's asking for an Ingress and waits
	// until the Ingress controller has judged it: a Warning about it, or
	// an Ingress, which bad reports on.
	annotated := func(t *testing.T, svc *corev1.Service, bad func(*networkingv1.Ingress) error) {
		t.Helper()
		ns := teamNamespace(t, teamB)
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[ingress.AnnotationEnabled] = "true"
		if _, err := teamB.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("team B creating Service %s: %v", svc.Name, err)
		}
		harmlessOnceObserved(t, func(ctx context.Context) (bool, error) { return warningAbout(ctx, ns, "Service", svc.Name) },
			func(ctx context.Context) error {
				list, err := admin.kube.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return nil
				}
				for i := range list.Items {
					if routesTo(&list.Items[i], svc.Name) {
						if err := bad(&list.Items[i]); err != nil {
							return err
						}
					}
				}
				return nil
			})
	}

	t.Run("Service of type ExternalName", func(t *testing.T) {
		nsA := teamNamespace(t, teamA)
		annotated(t, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("external")},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "internal." + nsA + ".svc.cluster.local",
				Ports: []corev1.ServicePort{{Port: 80}}},
		}, func(ing *networkingv1.Ingress) error {
			return fmt.Errorf("annotated ExternalName Service got Ingress %s/%s, routing outside its namespace", ing.Namespace, ing.Name)
		})
	})
	t.Run("wildcard host", func(t *testing.T) {
		annotated(t, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("wildcard"), Annotations: map[string]string{ingress.AnnotationHost: "*.example.com"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, func(ing *networkingv1.Ingress) error {
			return fmt.Errorf("annotated Service got Ingress %s/%s for hosts %v, with no wildcard allowed", ing.Namespace, ing.Name, hosts(ing))
		})
	})
	t.Run("App without an ingress domain", func(t *testing.T) {
		ns := teamNamespace(t, teamB)
		created, err := teamB.crd.AppV1beta1().Apps(ns).Create(ctx, newApp(uniqueName("app"), true), metav1.CreateOptions{})
		if err != nil {
			t.Logf("refused, as it may be: %v", err)
			return
		}
		harmlessOnceObserved(t, func(ctx context.Context) (bool, error) {
			app, err := admin.crd.AppV1beta1().Apps(ns).Get(ctx, created.Name, metav1.GetOptions{})
			return err == nil && app.Status.ObservedGeneration == app.Generation, err
		}, func(ctx context.Context) error {
			list, err := admin.kube.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil
			}
			for _, ing := range list.Items {
				if ing.Spec.DefaultBackend != nil {
					return fmt.Errorf("App's Ingress %s has a default backend: it catches every unmatched request", ing.Name)
				}
				for _, r := range ing.Spec.Rules {
					if r.Host == "" {
						return fmt.Errorf("App's Ingress %s has a rule without a host: it catches every unmatched request", ing.Name)
					}
				}
			}
			return nil
		})
	})
}

// routesTo reports whether ing sends requests to the Service name.
func routesTo(ing *networkingv1.Ingress, name string) bool {
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil && b.Service.Name == name {
		return true
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Service != nil && p.Backend.Service.Name == name {
				return true
			}
		}
	}
	return false
}

func hosts(ing *networkingv1.Ingress) []string {
	var out []string
	for _, r := range ing.Spec.Rules {
		out = append(out, r.Host)
	}
	return out
}
