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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TrimManagedFields, the first step of the informers' transform (Compact), drops managedFields,
// often the largest part of an object, from every object but this manager's
// own children. Of those it keeps only this manager's entries, which is all
// drift needs (upToDate): the fields of its "Apply" entry, and that an
// "Update" entry (a Create's) exists, without its fields, about a third of a
// Deployment as cached. The one use of the whole list, the move of a Create's
// entry to an Apply entry, reads the child live (upgradeCreated).
func TrimManagedFields(obj any) (any, error) {
	target := obj
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		target = tombstone.Obj
	}
	accessor, err := meta.Accessor(target)
	if err != nil {
		return obj, nil
	}
	accessor.SetManagedFields(ownManagedFields(accessor.GetManagedFields()))
	return obj, nil
}

// ownManagedFields is what TrimManagedFields keeps of entries.
func ownManagedFields(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var own []metav1.ManagedFieldsEntry
	for _, mf := range entries {
		if mf.Manager != FieldManager || mf.Subresource != "" {
			continue
		}
		if mf.Operation != metav1.ManagedFieldsOperationApply {
			mf.FieldsV1 = nil
		}
		own = append(own, mf)
	}
	return own
}
