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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/controller/priorityqueue"
)

// The handlers below give every key its priority, so that no controller
// decides it: a real change (a create seen after the initial list, an update
// with a new resourceVersion, a delete) is High; the initial list and
// resyncs are Low.

// addPriority: an object of the informer's initial list was not just created.
func addPriority(isInInitialList bool) priorityqueue.Priority {
	if isInInitialList {
		return PriorityLow
	}
	return PriorityHigh
}

// updatePriority: an update with an unchanged resourceVersion is a resync.
func updatePriority(oldObj, newObj any) priorityqueue.Priority {
	if IsResync(oldObj, newObj) {
		return PriorityLow
	}
	return PriorityHigh
}

// EnqueueObject returns handlers that enqueue the object itself on add,
// update and delete. Periodic resyncs are NOT skipped: for a controller's
// primary resource they are the level-triggered safety net.
func EnqueueObject(q Queue) cache.ResourceEventHandlerDetailedFuncs {
	enqueue := func(obj any, p priorityqueue.Priority) {
		if o, ok := objectMeta(obj); ok {
			q.AddWithPriority(cache.MetaObjectToName(o), p)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, isInInitialList bool) { enqueue(obj, addPriority(isInInitialList)) },
		UpdateFunc: func(oldObj, newObj any) { enqueue(newObj, updatePriority(oldObj, newObj)) },
		DeleteFunc: func(obj any) { enqueue(obj, PriorityHigh) },
	}
}

// EnqueueControllerOf returns handlers that enqueue the controller owner of
// an object when that owner is of ownerKind. Owners of cluster-scoped kinds
// get an empty namespace in their key. Resync updates are skipped: the
// owner's own resync covers them.
func EnqueueControllerOf(q Queue, ownerKind schema.GroupKind, ownerClusterScoped bool) cache.ResourceEventHandlerDetailedFuncs {
	return EnqueueMapped(q, func(obj metav1.Object) []Key {
		ref := controllerOfKind(obj, ownerKind)
		if ref == nil {
			return nil
		}
		namespace := obj.GetNamespace()
		if ownerClusterScoped {
			namespace = ""
		}
		return []Key{{Namespace: namespace, Name: ref.Name}}
	})
}

// controllerOfKind is obj's controller reference when that controller is of
// ownerKind (any version of its group), nil otherwise.
func controllerOfKind(obj metav1.Object, ownerKind schema.GroupKind) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != ownerKind.Kind {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != ownerKind.Group {
		return nil
	}
	return ref
}

// EnqueueMapped returns handlers that enqueue the keys mapFn returns for the
// object; on update, for both the old and the new object, so a changed
// relation reaches both sides. Resync updates are skipped.
func EnqueueMapped(q Queue, mapFn func(obj metav1.Object) []Key) cache.ResourceEventHandlerDetailedFuncs {
	enqueue := func(obj any, p priorityqueue.Priority) {
		if o, ok := objectMeta(obj); ok {
			for _, key := range mapFn(o) {
				q.AddWithPriority(key, p)
			}
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) { enqueue(obj, addPriority(isInInitialList)) },
		UpdateFunc: func(oldObj, newObj any) {
			if IsResync(oldObj, newObj) {
				return
			}
			enqueue(oldObj, PriorityHigh)
			enqueue(newObj, PriorityHigh)
		},
		DeleteFunc: func(obj any) { enqueue(obj, PriorityHigh) },
	}
}

// EnqueueUnblocked returns handlers for a kind of child that enqueue the
// owners an object of that kind may have been keeping from their own child
// (a same-name object they do not control): when the object is deleted, and
// when its controller changes (released, or adopted). blocked maps an object
// to those owners' keys; it sees every object of the kind, so it must find
// them by index, not by listing. Without this an owner whose key was dropped
// after MaxRetries would wait for the next resync once the blocker is gone.
func EnqueueUnblocked(q Queue, blocked func(obj metav1.Object) []Key) cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		if o, ok := objectMeta(obj); ok {
			for _, key := range blocked(o) {
				q.Add(key)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := objectMeta(oldObj)
			n, okNew := objectMeta(newObj)
			if okOld && okNew && controllerUID(o) != controllerUID(n) {
				enqueue(newObj)
			}
		},
		DeleteFunc: enqueue,
	}
}

// controllerUID is the UID of obj's controller, empty when it has none.
func controllerUID(obj metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID
	}
	return ""
}

// IsResync reports whether an update carries the same resourceVersion on
// both sides, i.e. it comes from a periodic resync, not from a change.
func IsResync(oldObj, newObj any) bool {
	o, okOld := objectMeta(oldObj)
	n, okNew := objectMeta(newObj)
	return okOld && okNew && o.GetResourceVersion() == n.GetResourceVersion()
}

// objectMeta returns the object's metadata, looking inside the tombstone
// informers hand out when they missed a delete.
func objectMeta(obj any) (metav1.Object, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	return o, true
}
