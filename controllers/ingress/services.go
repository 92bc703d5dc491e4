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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Wanted reports whether the controller acts on the Service: one with an
// ingress/ annotation, the only Services its informer holds. A Service
// without any may still control an Ingress from before; sync finds it
// from the Ingress.
func Wanted(svc metav1.Object) bool {
	for k := range svc.GetAnnotations() {
		if strings.HasPrefix(k, annotationPrefix) {
			return true
		}
	}
	return false
}

// NewServiceInformer is the controller's Services informer, a
// k8s.io/client-go/informers NewInformerFunc: it lists and watches every
// Service, as nothing selects annotations on the server, but holds only
// the Wanted ones (controller.FilteredListerWatcher), so that the
// Services of a cluster the manager does not manage cost it nothing.
func NewServiceInformer(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	services := client.CoreV1().Services(metav1.NamespaceAll)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return services.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return services.Watch(ctx, o)
		},
	}, client)
	return cache.NewSharedIndexInformerWithOptions(controller.NewFilteredListerWatcher(lw, Wanted), &corev1.Service{},
		cache.SharedIndexInformerOptions{
			ResyncPeriod: resync,
			Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		})
}
