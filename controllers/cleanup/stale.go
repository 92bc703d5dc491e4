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

package cleanup

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// KeepAnnotation set to "true" on an object protects it from the sweeper.
const KeepAnnotation = "ndsl.cn/keep"

// ownerLookup tells whether the owner a reference names still exists.
// known is false for owner kinds the sweeper does not track: their
// dependents are never judged orphaned.
type ownerLookup func(ref metav1.OwnerReference, dependentNamespace string) (uid types.UID, found, known bool)

// sweepable reports whether the sweeper may consider obj at all: it must
// carry this manager's managed-by label and not the keep annotation.
func sweepable(obj metav1.Object) bool {
	return obj.GetLabels()[controller.ManagedByLabel] == controller.ManagedByValue &&
		obj.GetAnnotations()[KeepAnnotation] != "true"
}

// orphanReason says why obj has lost its controller, or "" when it has not.
// The sweeper removes only what still names a controller of a known kind
// that is gone or was replaced by a new object of the same name. An object
// without a controller reference is left alone: `kubectl delete
// --cascade=orphan` gets the garbage collector to remove the owner's
// references from its dependents before the owner goes, so such an object
// was orphaned on purpose (or was never ours to judge).
func orphanReason(obj metav1.Object, lookup ownerLookup) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return ""
	}
	uid, found, known := lookup(*ref, obj.GetNamespace())
	switch {
	case !known:
		return ""
	case !found:
		return "its owner " + ref.Kind + " " + ref.Name + " no longer exists"
	case uid != ref.UID:
		return "its owner " + ref.Kind + " " + ref.Name + " was replaced by a new object"
	}
	return ""
}

// trackedKind is a kind of object the sweeper removes when stale.
type trackedKind struct {
	kind       string
	apiVersion string
	resource   schema.GroupVersionResource
}

// ownerKind is a kind of controller whose dependents the sweeper judges.
type ownerKind struct {
	resource      schema.GroupVersionResource
	clusterScoped bool
}
