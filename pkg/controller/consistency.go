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
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// DefaultConsistencyTimeout is how long a ConsistencyStore holds an owner
// back for writes its informers have not observed. They normally observe
// them within milliseconds; the bound only matters when one never is.
const DefaultConsistencyTimeout = 30 * time.Second

// ConsistencyStore remembers, per owner, the writes a controller made for it
// until the controller's informers have observed them, so that a reconcile
// does not act on a cache older than its own previous writes: it would
// create a child that exists (AlreadyExists), update from a stale copy
// (Conflict) or write a status twice.
//
// It is kube-controller-manager's consistency store
// (k8s.io/kubernetes/pkg/controller/util/consistency) plus deletes and a
// timeout: a store has observed a write once its last resource version
// reaches the written one, and a delete once it no longer holds the object,
// or holds it marked for deletion. Writes for an owner with a new UID
// replace those of the earlier owner of the same name.
type ConsistencyStore struct {
	stores  map[schema.GroupResource]cache.Store
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	owners map[Key]*ownerWrites
}

// ownerWrites are one owner's writes not yet observed.
type ownerWrites struct {
	uid       types.UID
	lastWrite time.Time
	versions  map[schema.GroupResource]string
	// deletes maps a resource to the store keys and UIDs of deleted objects.
	deletes map[schema.GroupResource]map[string]types.UID
}

// NewConsistencyStore returns a store that checks writes of each resource
// against the informer store given for it (an informer's GetStore());
// writes of other resources are not waited for. Check stops holding an owner
// back once its last write is older than timeout.
func NewConsistencyStore(stores map[schema.GroupResource]cache.Store, timeout time.Duration) *ConsistencyStore {
	return &ConsistencyStore{stores: stores, timeout: timeout, now: time.Now, owners: map[Key]*ownerWrites{}}
}

// Wrote records a create, update or patch made for owner: written is the
// API server's answer, an object of resource.
func (s *ConsistencyStore) Wrote(owner metav1.Object, resource schema.GroupResource, written metav1.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.record(owner)
	rv := written.GetResourceVersion()
	if old, ok := w.versions[resource]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(old, rv); err == nil && cmp >= 0 {
			return
		}
	}
	w.versions[resource] = rv
}

// Deleted records that deleted, an object of resource, was deleted for
// owner.
func (s *ConsistencyStore) Deleted(owner metav1.Object, resource schema.GroupResource, deleted metav1.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.record(owner)
	if w.deletes[resource] == nil {
		w.deletes[resource] = map[string]types.UID{}
	}
	w.deletes[resource][cache.MetaObjectToName(deleted).String()] = deleted.GetUID()
}

// Check returns nil once the informers have observed owner's recorded
// writes, or once the last of them is older than the timeout; until then a
// *NotObservedError, which the worker retries with the key's backoff kept
// (as kube-controller-manager's EnsureReady does), so that a reconcile that
// writes and fails again and again still backs off and reaches its retry
// bound.
func (s *ConsistencyStore) Check(ctx context.Context, owner Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.owners[owner]
	if w == nil {
		return nil
	}
	if s.observed(w) {
		delete(s.owners, owner)
		return nil
	}
	waited := s.now().Sub(w.lastWrite)
	if waited >= s.timeout {
		klog.FromContext(ctx).V(2).Info("Informers have not observed the last writes in time; acting on the cache as it is", "timeout", s.timeout)
		delete(s.owners, owner)
		return nil
	}
	return &NotObservedError{Owner: owner, For: waited}
}

// Clear forgets owner's writes, once the owner is gone: those of the owner
// with ownerUID only, or of any owner of that name when ownerUID is empty.
func (s *ConsistencyStore) Clear(owner Key, ownerUID types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.owners[owner]; w != nil && (ownerUID == "" || w.uid == ownerUID) {
		delete(s.owners, owner)
	}
}

// record returns owner's record, replacing one left by an earlier owner of
// the same name; the caller holds mu.
func (s *ConsistencyStore) record(owner metav1.Object) *ownerWrites {
	key := cache.MetaObjectToName(owner)
	w := s.owners[key]
	if w == nil || w.uid != owner.GetUID() {
		w = &ownerWrites{
			uid:      owner.GetUID(),
			versions: map[schema.GroupResource]string{},
			deletes:  map[schema.GroupResource]map[string]types.UID{},
		}
		s.owners[key] = w
	}
	w.lastWrite = s.now()
	return w
}

// observed reports whether the stores have observed every write in w; the
// caller holds mu.
func (s *ConsistencyStore) observed(w *ownerWrites) bool {
	for resource, wrote := range w.versions {
		store := s.stores[resource]
		if store == nil {
			continue
		}
		read := store.LastStoreSyncResourceVersion()
		if read == "" {
			continue // client-go's AtomicFIFO feature is off: nothing to compare
		}
		// An error means resource versions that cannot be compared: do not
		// hold the owner back for them.
		if cmp, err := resourceversion.CompareResourceVersion(wrote, read); err == nil && cmp > 0 {
			return false
		}
	}
	for resource, objects := range w.deletes {
		store := s.stores[resource]
		if store == nil {
			continue
		}
		for key, uid := range objects {
			obj, exists, err := store.GetByKey(key)
			if err != nil || !exists {
				continue
			}
			if o, ok := objectMeta(obj); ok && o.GetUID() == uid && o.GetDeletionTimestamp() == nil {
				return false
			}
		}
	}
	return true
}
