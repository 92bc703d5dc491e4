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
	"hash"
	"maps"
	"slices"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// upToDateVerdicts remembers, per child, the version of it last found
// exactly as desired and what was desired then, so that a reconcile of an
// unchanged child does not compare it again (the comparison is most of a
// reconcile's cost). Any change of the child that drift could see, or of
// what is desired (other desired bytes), misses and is compared in full.
// Only "up to date" is remembered, found so or created so
// (rememberCreated): any other verdict leads to a write.
//
// What a verdict holds for (versionOf) is the child's resourceVersion, or,
// for kinds whose generation the API server raises on every change of their
// spec (specGenerations), its generation and metadata: there a status write
// (kube-controller-manager's, several per Deployment while its pods start)
// keeps the verdict, as it cannot have changed what drift compares.
//
// A plain map under a lock, not a sync.Map: an entry of one costs about a
// quarter (no boxed keys and values, no trie nodes), and there is one per
// cached child.
type upToDateVerdicts struct {
	// bySpec: the kind's generation follows its spec (specGenerations).
	bySpec bool
	mu     sync.RWMutex
	byUID  map[types.UID]verdict
}

// specGenerations are the kinds whose registry strategy raises
// metadata.generation on every change of the spec (and, for Deployments, of
// the annotations), and never on a status write.
var specGenerations = map[schema.GroupResource]bool{
	{Group: "apps", Resource: "deployments"}:            true,
	{Group: "networking.k8s.io", Resource: "ingresses"}: true,
}

// othersOnly are the annotations the control plane writes on children and
// this manager never desires, so they cannot change a verdict: the
// Deployment controller's revision, set right after each Deployment is
// created (which cost every new App's Deployment a second comparison).
var othersOnly = map[string]bool{
	"deployment.kubernetes.io/revision": true,
}

// verdict is one child's remembered verdict.
type verdict struct {
	version, desired digest
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

// versionOf is what a verdict remembers of live: its resourceVersion, or,
// with bySpec, its generation and everything of its metadata drift reads
// (labels, annotations but othersOnly, owner references, this manager's
// managedFields entries).
func (v *upToDateVerdicts) versionOf(live metav1.Object) digest {
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if !v.bySpec || live.GetGeneration() == 0 {
		field(live.GetResourceVersion())
		return sum(h)
	}
	field(strconv.FormatInt(live.GetGeneration(), 10))
	for _, m := range []map[string]string{live.GetLabels(), live.GetAnnotations()} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if othersOnly[k] {
				continue
			}
			field(k)
			field(m[k])
		}
		h.Write([]byte{1})
	}
	for _, ref := range live.GetOwnerReferences() {
		field(ref.APIVersion)
		field(ref.Kind)
		field(ref.Name)
		field(string(ref.UID))
		field(strconv.FormatBool(ptr.Deref(ref.Controller, false)))
		field(strconv.FormatBool(ptr.Deref(ref.BlockOwnerDeletion, false)))
	}
	h.Write([]byte{1})
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != FieldManager || mf.Subresource != "" {
			continue
		}
		field(string(mf.Operation))
		field(mf.APIVersion)
		if mf.Time != nil {
			field(mf.Time.UTC().String())
		}
		if mf.FieldsV1 != nil {
			field(string(mf.FieldsV1.Raw))
		}
	}
	return sum(h)
}

func sum(h hash.Hash) digest {
	var d digest
	copy(d[:], h.Sum(nil))
	return d
}

// upToDate reports whether live, as it is now, was found exactly as the
// desired fields whose digest is desired.
func (v *upToDateVerdicts) upToDate(live metav1.Object, desired digest) bool {
	v.mu.RLock()
	remembered, ok := v.byUID[live.GetUID()]
	v.mu.RUnlock()
	return ok && remembered.desired == desired && remembered.version == v.versionOf(live)
}

// remember records that live was found exactly as the desired fields whose digest is desired.
func (v *upToDateVerdicts) remember(live metav1.Object, desired digest) {
	if live.GetResourceVersion() == "" {
		return // not a served object: nothing identifies its content
	}
	version := v.versionOf(live)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byUID == nil {
		v.byUID = map[types.UID]verdict{}
	}
	v.byUID[live.GetUID()] = verdict{version: version, desired: desired}
}

// rememberCreated remembers as up to date a child this manager just created
// from the desired fields whose digest is desired, as the API server
// answered the create: it holds those fields, so the reconciles its own
// events bring (one per child created, most of a new App's work) compare
// nothing. An admission plugin may have changed one of them on the way in;
// that is kept until the child or desired changes, where a comparison
// would have applied desired over it once. The cache holds the child with
// its managedFields trimmed (TrimManagedFields): so does its version here.
// A child deleted before the cache ever held it gets no delete event, and
// its verdict (about 100 bytes) stays until the manager restarts.
func (v *upToDateVerdicts) rememberCreated(created metav1.Object, desired digest) {
	v.remember(&metav1.ObjectMeta{
		UID: created.GetUID(), ResourceVersion: created.GetResourceVersion(), Generation: created.GetGeneration(),
		Labels: created.GetLabels(), Annotations: created.GetAnnotations(), OwnerReferences: created.GetOwnerReferences(),
		ManagedFields: ownManagedFields(created.GetManagedFields()),
	}, desired)
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
