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
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// annotationPrefix is the prefix of every annotation the controller reads.
const annotationPrefix = "ingress/"

// TransformService cuts a Service down to what the controller reads: its
// identity, its ingress/ annotations and, when it has any, its type and
// port numbers. The informer holds only the Wanted Services, the ones with such
// annotations; one that loses them passes here once more, on its way out.
func TransformService(obj any) (any, error) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		lean, err := TransformService(tombstone.Obj)
		return cache.DeletedFinalStateUnknown{Key: tombstone.Key, Obj: lean}, err
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	lean := &corev1.Service{
		TypeMeta: svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              svc.Name,
			Namespace:         svc.Namespace,
			UID:               svc.UID,
			ResourceVersion:   svc.ResourceVersion,
			Generation:        svc.Generation,
			DeletionTimestamp: svc.DeletionTimestamp,
		},
	}
	for k, v := range svc.Annotations {
		if strings.HasPrefix(k, annotationPrefix) {
			if lean.Annotations == nil {
				lean.Annotations = map[string]string{}
			}
			lean.Annotations[k] = v
		}
	}
	if lean.Annotations != nil {
		// An ExternalName Service is refused: its type, and where it points for the Warning.
		lean.Spec.Type, lean.Spec.ExternalName = svc.Spec.Type, svc.Spec.ExternalName
		for _, p := range svc.Spec.Ports {
			lean.Spec.Ports = append(lean.Spec.Ports, corev1.ServicePort{Name: p.Name, Port: p.Port})
		}
	}
	// Namespaces and annotation keys repeat across Services: one copy each.
	return controller.Compact(lean)
}
