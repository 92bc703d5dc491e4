package app

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// writeTracker remembers, per App, this controller's latest writes until the
// informers have observed them, so that a reconcile never acts on a cache
// older than its own writes: without it, the reconcile that the write's own
// watch event (or any other event) triggers would see a missing child, or the
// old status, and write again. It is kube-controller-manager's consistency
// store (k8s.io/kubernetes/pkg/controller/util/consistency) in small, plus
// deletes: a store has observed a write once its last resource version
// reaches the written one, and a delete once it no longer holds the object.
type writeTracker struct {
	stores map[schema.GroupResource]cache.Store
	// timeout bounds the wait for writes that are never observed (a store
	// without resource versions, a relist that skipped them).
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	owners map[controller.Key]*ownerWrites
}

type ownerWrites struct {
	uid      types.UID
	last     time.Time
	versions map[schema.GroupResource]string
	// deletes maps a resource to the store keys and UIDs of deleted objects.
	deletes map[schema.GroupResource]map[string]types.UID
}

func newWriteTracker(stores map[schema.GroupResource]cache.Store, timeout time.Duration) *writeTracker {
	return &writeTracker{stores: stores, timeout: timeout, now: time.Now, owners: map[controller.Key]*ownerWrites{}}
}

// record returns the owner's record, replacing one left by an earlier owner
// of the same name.
func (w *writeTracker) record(owner controller.Key, ownerUID types.UID) *ownerWrites {
	r := w.owners[owner]
	if r == nil || r.uid != ownerUID {
		r = &ownerWrites{uid: ownerUID, versions: map[schema.GroupResource]string{}, deletes: map[schema.GroupResource]map[string]types.UID{}}
		w.owners[owner] = r
	}
	r.last = w.now()
	return r
}

// wrote records that a write for owner left an object of resource at
// resourceVersion.
func (w *writeTracker) wrote(owner controller.Key, ownerUID types.UID, resource schema.GroupResource, resourceVersion string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.record(owner, ownerUID)
	if old, ok := r.versions[resource]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(old, resourceVersion); err == nil && cmp >= 0 {
			return
		}
	}
	r.versions[resource] = resourceVersion
}

// deleted records that a write for owner deleted the object of resource
// with this store key and UID.
func (w *writeTracker) deleted(owner controller.Key, ownerUID types.UID, resource schema.GroupResource, key string, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.record(owner, ownerUID)
	if r.deletes[resource] == nil {
		r.deletes[resource] = map[string]types.UID{}
	}
	r.deletes[resource][key] = uid
}

// wait returns how much longer owner's reconcile should wait for the
// informers to observe its writes: zero once they have, or once they are
// older than the timeout.
func (w *writeTracker) wait(owner controller.Key) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.owners[owner]
	if r == nil {
		return 0
	}
	if w.observed(r) {
		delete(w.owners, owner)
		return 0
	}
	left := w.timeout - w.now().Sub(r.last)
	if left <= 0 {
		delete(w.owners, owner)
		return 0
	}
	return left
}

func (w *writeTracker) observed(r *ownerWrites) bool {
	for resource, wrote := range r.versions {
		store := w.stores[resource]
		if store == nil {
			continue
		}
		read := store.LastStoreSyncResourceVersion()
		if read == "" {
			continue // the client's AtomicFIFO feature is off: nothing to compare
		}
		if cmp, err := resourceversion.CompareResourceVersion(wrote, read); err == nil && cmp > 0 {
			return false
		}
	}
	for resource, objects := range r.deletes {
		store := w.stores[resource]
		if store == nil {
			continue
		}
		for key, uid := range objects {
			if obj, exists, err := store.GetByKey(key); err == nil && exists && uidOf(obj) == uid {
				return false
			}
		}
	}
	return true
}

// forget drops owner's record, once the owner is gone.
func (w *writeTracker) forget(owner controller.Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.owners, owner)
}

func uidOf(obj any) types.UID {
	if o, ok := obj.(interface{ GetUID() types.UID }); ok {
		return o.GetUID()
	}
	return ""
}
