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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// unselectedTransform trims what the unselected shared factory caches: it
// holds every object of its kinds in the cluster, not only the manager's.
// Services, the only such kind a controller reads whole (the Ingress
// controller's inputs), keep only what that controller reads.
func unselectedTransform(obj any) (any, error) {
	target := obj
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		target = tombstone.Obj
	}
	if _, ok := target.(*corev1.Service); ok {
		return ingress.TransformService(obj)
	}
	return controller.Compact(obj)
}
