package pipeline

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
)

// recentWriteTTL bounds how long a write is remembered while the informer
// has not shown it; informers normally catch up within milliseconds.
const recentWriteTTL = 30 * time.Second

// recentWrites remembers the objects this controller created, updated or
// deleted until its informers have caught up with them. A reconcile that runs
// before the watch event of its previous write arrives would otherwise create
// the same child again (AlreadyExists), update from a stale copy (Conflict)
// or delete twice: each a wasted write. It plays the part of the ReplicaSet
// controller's expectations, keyed by object rather than counted, and
// compares resource versions as apimachinery's resourceversion package allows.
type recentWrites struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[recentKey]recentWrite
}

type recentKey struct {
	kind            string
	namespace, name string
}

type recentWrite struct {
	// obj is the object as the API server returned it; nil after a delete.
	obj metav1.Object
	// deletedUID is the UID of the object deleted.
	deletedUID types.UID
	at         time.Time
}

func newRecentWrites(now func() time.Time) *recentWrites {
	return &recentWrites{now: now, entries: map[recentKey]recentWrite{}}
}

func keyOf(kind string, obj metav1.Object) recentKey {
	return recentKey{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName()}
}

// wrote records obj, the API server's answer to a create or update.
func (r *recentWrites) wrote(kind string, obj metav1.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweep()
	r.entries[keyOf(kind, obj)] = recentWrite{obj: obj, at: r.now()}
}

// deleted records that obj was deleted.
func (r *recentWrites) deleted(kind string, obj metav1.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweep()
	r.entries[keyOf(kind, obj)] = recentWrite{deletedUID: obj.GetUID(), at: r.now()}
}

// observeDelete is called with the informer's delete events: an object this
// controller created and someone deleted must not be taken for one the
// informer has not seen yet.
func (r *recentWrites) observeDelete(kind string, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := keyOf(kind, o)
	if e, ok := r.entries[k]; ok && e.obj != nil && e.obj.GetUID() == o.GetUID() {
		delete(r.entries, k)
	}
}

// latest returns the newer of cached (nil when the lister has no such
// object) and what this controller last wrote under the same key.
func (r *recentWrites) latest(kind, namespace, name string, cached metav1.Object) metav1.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := recentKey{kind: kind, namespace: namespace, name: name}
	e, ok := r.entries[k]
	if !ok {
		return cached
	}
	if r.now().Sub(e.at) > recentWriteTTL {
		delete(r.entries, k)
		return cached
	}
	if e.obj == nil { // deleted by us
		if cached != nil && cached.GetUID() == e.deletedUID {
			return nil // the informer has not seen the delete yet
		}
		delete(r.entries, k)
		return cached
	}
	if cached == nil {
		return e.obj // the informer has not seen the create yet
	}
	if cmp, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), e.obj.GetResourceVersion()); err != nil || cmp >= 0 {
		delete(r.entries, k) // caught up (or not comparable: trust the informer)
		return cached
	}
	return e.obj
}

// sweep drops expired entries; the caller holds mu.
func (r *recentWrites) sweep() {
	now := r.now()
	for k, e := range r.entries {
		if now.Sub(e.at) > recentWriteTTL {
			delete(r.entries, k)
		}
	}
}
