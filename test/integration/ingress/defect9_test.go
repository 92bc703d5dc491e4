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
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Issue 12, defect 9: removing the ingress/class annotation must take the
// class off the Ingress (no default class here), or put the default back.
func TestRemovingTheClassAnnotationClearsTheClass(t *testing.T) {
	for _, defaultClass := range []string{"", "nginx"} {
		t.Run("default class "+fmt.Sprintf("%q", defaultClass), func(t *testing.T) {
			ctx := context.Background()
			client := cp.Client
			ns := framework.CreateNamespace(t, client)
			framework.StartManager(t, cp.Config, func(o *options.Options) {
				withDefaults(o)
				o.Ingress.DefaultClass = defaultClass
			})
			if _, err := client.CoreV1().Services(ns).Create(ctx, annotatedService(ns, "web", map[string]string{
				ingress.AnnotationEnabled: "true", ingress.AnnotationClass: "traefik",
			}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			class := func(ctx context.Context) (string, error) {
				ing, err := client.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				if ing.Spec.IngressClassName == nil {
					return "", nil
				}
				return *ing.Spec.IngressClassName, nil
			}
			framework.Eventually(t, timeout, "the Ingress with class traefik", func(ctx context.Context) (bool, error) {
				got, err := class(ctx)
				return got == "traefik", err
			})

			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, ingress.AnnotationClass)
			if _, err := client.CoreV1().Services(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			var got string
			framework.Eventually(t, timeout, fmt.Sprintf("the class to become %q", defaultClass), func(ctx context.Context) (bool, error) {
				var err error
				got, err = class(ctx)
				return got == defaultClass, err
			})
		})
	}
}

// Issue 12, defect 9: an Ingress already gone when the controller deletes
// it (NotFound) was not deleted by the controller: no DeletedIngress event.
func TestNoDeletedIngressEventWhenTheDeleteFindsNothing(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	// Someone else deletes the Ingress just before the manager's DELETE
	// reaches the API server, which then answers NotFound.
	var raced atomic.Int32
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodDelete && strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/ingresses/raced") {
				if err := client.NetworkingV1().Ingresses(ns).Delete(req.Context(), "raced", metav1.DeleteOptions{}); err != nil {
					t.Errorf("deleting the Ingress ahead of the manager: %v", err)
				}
				raced.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	m := framework.StartManager(t, cfg, withDefaults)
	for _, name := range []string{"raced", "marker"} {
		if _, err := client.CoreV1().Services(ns).Create(ctx,
			annotatedService(ns, name, map[string]string{ingress.AnnotationEnabled: "true"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, timeout, "the Ingress "+name, func(ctx context.Context) (bool, error) {
			_, err := client.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil, nil
		})
	}
	unannotate := func(name string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, ingress.AnnotationEnabled)
		if _, err := client.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unannotate("raced")
	framework.Eventually(t, timeout, "the manager's DELETE of the raced Ingress", func(context.Context) (bool, error) {
		return raced.Load() > 0, nil
	})
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) {
		return m.QueuesEmpty()
	})
	// The recorder sends events in order: once the marker's DeletedIngress
	// has arrived, any event about the raced Service has too.
	unannotate("marker")
	events := func(ctx context.Context, name string) (int, error) {
		list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
			"involvedObject.kind": "Service", "involvedObject.name": name, "reason": "DeletedIngress",
		}).String()})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	framework.Eventually(t, timeout, "the marker's DeletedIngress event", func(ctx context.Context) (bool, error) {
		n, err := events(ctx, "marker")
		return n > 0, err
	})
	if n, err := events(ctx, "raced"); err != nil || n != 0 {
		t.Errorf("%d DeletedIngress events (err %v) for a Service whose Ingress the delete did not find, want 0", n, err)
	}
}
