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
	"crypto/sha256"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// upToDateVerdicts remembers, per child, the last live version found exactly
// as desired and what was desired then, so that a resync of a converged
// owner does not compare an unchanged child again (the comparison is most of
// a steady reconcile's cost). Any change of the child (a new resourceVersion)
// or of what is desired (other desired bytes) misses, and is compared in
// full. Only "up to date" is remembered: any other verdict leads to a write.
type upToDateVerdicts struct {
	byUID sync.Map // types.UID → verdict
}

// verdict is one child's remembered verdict.
type verdict struct {
	resourceVersion string
	desired         [sha256.Size]byte
}

// desiredSum is what a verdict remembers of the desired fields: a hash of
// their JSON encoding, which encoding/json makes deterministic.
func desiredSum(desiredJSON []byte) [sha256.Size]byte { return sha256.Sum256(desiredJSON) }

// upToDate reports whether live, at its resourceVersion, was found exactly
// as the desired fields of sum.
func (v *upToDateVerdicts) upToDate(live metav1.Object, sum [sha256.Size]byte) bool {
	got, ok := v.byUID.Load(live.GetUID())
	if !ok {
		return false
	}
	remembered := got.(verdict)
	return remembered.resourceVersion == live.GetResourceVersion() && remembered.desired == sum
}

// remember records that live was found exactly as the desired fields of sum.
func (v *upToDateVerdicts) remember(live metav1.Object, sum [sha256.Size]byte) {
	if live.GetResourceVersion() == "" {
		return // not a served object: nothing identifies its content
	}
	v.byUID.Store(live.GetUID(), verdict{resourceVersion: live.GetResourceVersion(), desired: sum})
}

// forget drops the verdict of a child that is gone.
func (v *upToDateVerdicts) forget(uid types.UID) { v.byUID.Delete(uid) }

// forgetDeleted is the informer handler that keeps the verdicts to the
// children that exist.
func (v *upToDateVerdicts) forgetDeleted() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if accessor, ok := obj.(metav1.Object); ok {
			v.forget(accessor.GetUID())
		}
	}}
}
