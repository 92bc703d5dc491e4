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
