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

package elector

import (
	"bytes"
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// LeaseWatch is one informer on the Leases of a namespace. Every unit's
// elector watches its Lease through the same one, and the layout fence the
// group's, so a replica keeps one watch on the API server however many
// units it competes for (64 at --shards=64), not one per unit.
type LeaseWatch struct {
	namespace string
	informer  cache.SharedIndexInformer
	lister    coordinationlisters.LeaseNamespaceLister
	shutdown  func()
}

// Informer is the watch's informer, for others that follow the namespace's
// Leases (the layout fence).
func (w *LeaseWatch) Informer() cache.SharedIndexInformer { return w.informer }

// Shutdown waits for the informer to stop, once the context NewLeaseWatch
// was given is done.
func (w *LeaseWatch) Shutdown() { w.shutdown() }

// NewLeaseWatch starts the informer; it stops when ctx is done, and
// Shutdown waits for that.
func NewLeaseWatch(ctx context.Context, client kubernetes.Interface, namespace string) *LeaseWatch {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	w := &LeaseWatch{namespace: namespace, informer: factory.Coordination().V1().Leases().Informer(),
		lister: factory.Coordination().V1().Leases().Lister().Leases(namespace), shutdown: factory.Shutdown}
	factory.Start(ctx.Done())
	return w
}

// WatchedLease is one Lease as this replica's watch shows it.
type WatchedLease struct {
	stop func()
	// lookup returns the Lease as last seen, and whether the watch has
	// synced (nil, true: there is no such Lease).
	lookup func() (*coordinationv1.Lease, bool)

	mu sync.Mutex
	// raw is the record of the version last seen held by another replica,
	// expires when it expires by this replica's clock: the time the watch
	// delivered it plus its lease duration, as client-go judges a holder by
	// when it saw the record change (a delivery is never before the write).
	raw     []byte
	expires time.Time
	timer   *time.Timer
}

// Stop ends the watch of this Lease.
func (l *WatchedLease) Stop() { l.stop() }

// Takeable says whether the Lease, as last seen, is free: released, or
// held by a version that has expired by this replica's clock.
func (l *WatchedLease) Takeable() bool {
	if l.released() {
		return true
	}
	lease, _ := l.lookup()
	return lease != nil && l.expired(LeaseRecord(lease), time.Now())
}

// released says whether the Lease, as last seen, has no holder.
func (l *WatchedLease) released() bool {
	lease, synced := l.lookup()
	return synced && (lease == nil || holder(lease) == "")
}

// expired says whether raw is the record of the version last seen held,
// and that version has expired: its holder wrote nothing since for a lease
// duration.
func (l *WatchedLease) expired(raw []byte, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw != nil && bytes.Equal(raw, l.raw) && !now.Before(l.expires)
}

// saw records a version delivered by the watch, and calls expire once it
// expires unless another version comes first.
func (l *WatchedLease) saw(obj any, identity string, expire func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.raw, l.timer = nil, nil
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || holder(lease) == "" || holder(lease) == identity || lease.Spec.LeaseDurationSeconds == nil {
		return
	}
	raw := LeaseRecord(lease)
	d := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	l.raw, l.expires = raw, time.Now().Add(d)
	if expire != nil {
		l.timer = time.AfterFunc(d, expire)
	}
}

// Watch follows the Lease name through the informer until Stop: it calls
// wake whenever the Lease goes from held to released (no holder) or is
// deleted, and expire (if not nil) once a version held by another replica
// than identity expires with nothing written since.
func (w *LeaseWatch) Watch(ctx context.Context, name, identity string, wake, expire func()) *WatchedLease {
	l := &WatchedLease{}
	reg, err := w.informer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				return tombstone.Key == w.namespace+"/"+name
			}
			lease, ok := obj.(*coordinationv1.Lease)
			return ok && lease.Name == name
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { l.saw(obj, identity, expire) },
			UpdateFunc: func(oldObj, newObj any) {
				l.saw(newObj, identity, expire)
				if holder(oldObj) != "" && holder(newObj) == "" {
					wake()
				}
			},
			DeleteFunc: func(any) {
				l.saw(nil, identity, nil)
				wake()
			},
		},
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot watch the Lease for its release; a standby notices it at its next retry", "lease", w.namespace+"/"+name)
	}
	l.stop = func() {
		if reg != nil {
			_ = w.informer.RemoveEventHandler(reg)
		}
		l.saw(nil, identity, nil)
	}
	l.lookup = func() (*coordinationv1.Lease, bool) {
		if !w.informer.HasSynced() {
			return nil, false
		}
		lease, err := w.lister.Get(name)
		if apierrors.IsNotFound(err) {
			return nil, true
		}
		return lease, err == nil
	}
	return l
}

func holder(obj any) string {
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}
