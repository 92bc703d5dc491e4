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

package manager

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// listRecorder records the collection reads (lists and watches) a client
// sends, by resource, with their label selectors.
type listRecorder struct {
	mu        sync.Mutex
	selectors map[string][]string
}

func (r *listRecorder) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet {
				if resource, ok := collectionOf(req.URL.Path); ok {
					q := req.URL.Query()
					// A blocker's watch names one object: not a cache.
					if !strings.HasPrefix(q.Get("fieldSelector"), "metadata.name=") {
						r.mu.Lock()
						r.selectors[resource] = append(r.selectors[resource], q.Get("labelSelector"))
						r.mu.Unlock()
					}
				}
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

// collectionOf returns the resource a path lists: /api/v1/services,
// /apis/apps/v1/namespaces/x/deployments; not a named object.
func collectionOf(path string) (string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "", false
	}
	if len(rest) >= 2 && rest[0] == "namespaces" {
		if len(rest) == 2 {
			return "namespaces", false // one namespace, by name
		}
		rest = rest[2:]
	}
	if len(rest) != 1 {
		return "", false
	}
	return rest[0], true
}

// The children's kinds are cached only as far as the manager manages them:
// every list and watch of them is selected by the managed-by label, so a
// Deployment, Service or ConfigMap the manager does not manage, in another
// namespace, never enters its caches. Before issue 26 every replica listed
// every Deployment, Service, Ingress, PVC and PV of the cluster.
func TestCachesHoldOnlyManagedChildren(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	ctx := context.Background()
	// A noisy neighbour: unmanaged objects of the children's kinds.
	other := framework.CreateNamespace(t, cp.Client)
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), other, metav1.DeleteOptions{})
	})
	labels := map[string]string{"app": "noise"}
	if _, err := cp.Client.AppsV1().Deployments(other).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "noise", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Services(other).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "noise"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "noise"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	rec := &listRecorder{selectors: map[string][]string{}}
	framework.StartManager(t, rec.wrap(cp.Config), func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName, pipeline.ControllerName}
	})

	// The App controller at work: its children come from the caches.
	ns := framework.CreateNamespace(t, cp.Client)
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	crd, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crd.AppV1beta1().Apps(ns).Create(ctx, &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), EnableService: true},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the App's Deployment and Service", func(ctx context.Context) (bool, error) {
		_, errD := cp.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		_, errS := cp.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		return errD == nil && errS == nil, nil
	})

	managed := controller.ManagedByLabel + "=" + controller.ManagedByValue
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, resource := range []string{"deployments", "services", "persistentvolumeclaims", "persistentvolumes", "pods"} {
		selectors := rec.selectors[resource]
		if len(selectors) == 0 {
			t.Errorf("%s: never listed", resource)
		}
		if i := slices.IndexFunc(selectors, func(s string) bool { return !strings.Contains(s, managed) }); i >= 0 {
			t.Errorf("%s listed or watched with label selector %q: every %s of the cluster enters the cache, not only the managed ones", resource, selectors[i], resource)
		}
	}
	for _, resource := range []string{"configmaps", "secrets"} {
		if n := len(rec.selectors[resource]); n > 0 {
			t.Errorf("%s listed or watched %d times; the manager caches none", resource, n)
		}
	}
}
