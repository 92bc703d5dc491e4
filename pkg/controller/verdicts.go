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
//
// A plain map under a lock, not a sync.Map: an entry of one costs about a
// quarter (no boxed keys and values, no trie nodes), and there is one per
// cached child.
type upToDateVerdicts struct {
	mu    sync.RWMutex
	byUID map[types.UID]verdict
}

// verdict is one child's remembered verdict. Its resourceVersion shares
// the cached child's string.
type verdict struct {
	resourceVersion string
	desired         digest
}

// digest is a truncated SHA-256: 128 bits tell desired fields apart as surely
// as 256 for this use, at half the bytes per child.
type digest [16]byte

// desiredSum is what a verdict remembers of the desired fields: a hash of
// their JSON encoding, which encoding/json makes deterministic.
func desiredSum(desiredJSON []byte) digest {
	full := sha256.Sum256(desiredJSON)
	return digest(full[:16])
}

// upToDate reports whether live, at its resourceVersion, was found exactly
// as the desired fields whose digest is desired.
func (v *upToDateVerdicts) upToDate(live metav1.Object, desired digest) bool {
	v.mu.RLock()
	remembered, ok := v.byUID[live.GetUID()]
	v.mu.RUnlock()
	return ok && remembered.resourceVersion == live.GetResourceVersion() && remembered.desired == desired
}

// remember records that live was found exactly as the desired fields whose digest is desired.
func (v *upToDateVerdicts) remember(live metav1.Object, desired digest) {
	if live.GetResourceVersion() == "" {
		return // not a served object: nothing identifies its content
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byUID == nil {
		v.byUID = map[types.UID]verdict{}
	}
	v.byUID[live.GetUID()] = verdict{resourceVersion: live.GetResourceVersion(), desired: desired}
}

// forget drops the verdict of a child that is gone.
func (v *upToDateVerdicts) forget(uid types.UID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.byUID, uid)
}

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
