package cleanup

import (
	corev1 "k8s.io/api/core/v1"
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

// orphanReason says why obj has lost its controller, or "" when it has not:
// either it has no controller reference (left by `kubectl delete
// --cascade=orphan`), or its controller of a known kind is gone or was
// replaced by a new object of the same name.
func orphanReason(obj metav1.Object, lookup ownerLookup) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return "it has no controller owner"
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

// releasedReason says why a model-storage PV is released, or "": it is
// phase Released, or the claim it was bound to is gone. claimUID returns the
// UID of the PVC namespace/name, found false when there is none.
func releasedReason(pv *corev1.PersistentVolume, claimUID func(namespace, name string) (types.UID, bool)) string {
	if pv.Status.Phase == corev1.VolumeReleased {
		return "it is Released"
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name == "" {
		return ""
	}
	uid, found := claimUID(ref.Namespace, ref.Name)
	if !found {
		return "its claim " + ref.Namespace + "/" + ref.Name + " is gone"
	}
	if ref.UID != "" && uid != ref.UID {
		return "its claim " + ref.Namespace + "/" + ref.Name + " was replaced by a new object"
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
