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
	"maps"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The controller's informer holds only Services with an ingress/
// annotation: one that loses them all leaves it as if deleted. Its Ingress
// goes all the same, whether the manager sees the change or was down when
// it happened, at the cost of one read of the Service; a Service deleted
// with its annotations costs no read (its Ingress is the garbage
// collector's); a Service that never had one is never written to, nor is
// anything of it.
func TestIngressGoesWhenTheServiceLosesItsAnnotations(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	services, ingresses := client.CoreV1().Services(ns), client.NetworkingV1().Ingresses(ns)
	annotations := map[string]string{ingress.AnnotationEnabled: "true", ingress.AnnotationHost: "shop.test"}
	for _, name := range []string{"seen", "unseen", "deleted"} {
		if _, err := services.Create(ctx, annotatedService(ns, name, annotations), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Never annotated: the manager must not care.
	if _, err := services.Create(ctx, annotatedService(ns, "plain", map[string]string{"team": "shop"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unannotate := func(name string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:null}}}`, ingress.AnnotationEnabled, ingress.AnnotationHost)
		if _, err := services.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingressGone := func(name string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := ingresses.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}
	}

	m := framework.StartManager(t, cp.Config, withDefaults)
	for _, name := range []string{"seen", "unseen", "deleted"} {
		framework.Eventually(t, timeout, "the Ingress of "+name, func(ctx context.Context) (bool, error) {
			_, err := ingresses.Get(ctx, name, metav1.GetOptions{})
			return err == nil, nil
		})
	}
	unannotate("seen")
	framework.Eventually(t, timeout, "the Ingress of the Service that lost its annotations to go", ingressGone("seen"))

	// Lost while no manager ran: the next one finds it from the Ingress.
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	unannotate("unseen")
	m = framework.StartManager(t, cp.Config, withDefaults)
	framework.Eventually(t, timeout, "the Ingress of the Service that lost its annotations while no manager ran to go", ingressGone("unseen"))

	// Deleted annotated: once a Service created after it has its Ingress,
	// and the queue is empty, the manager has handled the delete.
	if err := services.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := services.Create(ctx, annotatedService(ns, "marker", annotations), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the marker's Ingress, and an empty queue", func(ctx context.Context) (bool, error) {
		if _, err := ingresses.Get(ctx, "marker", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		return m.QueuesEmpty()
	})

	plain, err := services.Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingresses.Get(ctx, "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Service never annotated got an Ingress (%v)", err)
	}
	if len(plain.ManagedFields) != 1 {
		t.Errorf("the unannotated Service was written to: %+v", plain.ManagedFields)
	}
	// The second manager: the one delete and its Event, the marker's
	// Ingress, and one read of a Service, to tell "lost its annotations"
	// from "deleted".
	for req, n := range m.Writes.ByRequest() {
		switch {
		case req == "DELETE /apis/networking.k8s.io/v1/namespaces/"+ns+"/ingresses/unseen" && n == 1:
		case strings.HasPrefix(req, "POST ") && strings.HasSuffix(req, "/events"):
		case strings.Contains(req, "/ingresses") && strings.Contains(req, "marker") || req == "POST /apis/networking.k8s.io/v1/namespaces/"+ns+"/ingresses":
		default:
			t.Errorf("the second manager wrote %d× %s; all its writes:\n%s", n, req, m.Writes.Summary())
		}
	}
	// (Other namespaces: this control plane runs no garbage collector, so
	// Ingresses of Services deleted by earlier tests are still there.)
	reads := map[string]int{}
	for path, n := range m.Writes.Reads() {
		if strings.HasPrefix(path, "/api/v1/namespaces/"+ns+"/") {
			reads[path] = n
		}
	}
	want := map[string]int{"/api/v1/namespaces/" + ns + "/services/unseen": 1}
	if !maps.Equal(reads, want) {
		t.Errorf("the second manager read %v in the test's namespace, want only %v", reads, want)
	}
}
