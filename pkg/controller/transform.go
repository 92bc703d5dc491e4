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

package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// TrimManagedFields is the informers' transform: it drops managedFields,
// often the largest part of an object, from every object but this manager's
// own children, whose drift is judged by the fields this manager owns
// (upToDate) and whose managedFields a Create's entry is moved from whole
// (csaupgrade).
func TrimManagedFields(obj any) (any, error) {
	target := obj
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		target = tombstone.Obj
	}
	accessor, err := meta.Accessor(target)
	if err != nil {
		return obj, nil
	}
	for _, mf := range accessor.GetManagedFields() {
		if mf.Manager == FieldManager && mf.Subresource == "" {
			return obj, nil
		}
	}
	accessor.SetManagedFields(nil)
	return obj, nil
}
