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
	"context"
	"encoding/json"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// watchedLock reads a unit's Lease from the watch this replica keeps on it
// (LeaseWatch) instead of the API server while membership assigns the
// unit elsewhere. Every replica runs an elector for every unit, and an
// elector that does not hold its Lease reads it every retry period: with
// --shards, those reads crowded the client that renews the Leases held here
// (issue 36). The elector judges a Lease by when it saw it change, which
// the watch tells as well as a read. While the unit is assigned here, reads
// go to the API server, so an acquisition updates the Lease as it is.
type watchedLock struct {
	resourcelock.Interface
	lease *WatchedLease
	mine  func() bool
}

// WatchedLock wraps inner, the lock of the Lease lease follows, for a unit
// that mine says is assigned here.
func WatchedLock(inner resourcelock.Interface, lease *WatchedLease, mine func() bool) resourcelock.Interface {
	return &watchedLock{Interface: inner, lease: lease, mine: mine}
}

// A Lease the watch shows held by this replica is read from the API server
// too: the lock renews and releases the object it last read, and an
// acquisition whose answer was lost (its attempt cancelled by a release
// wake) leaves this replica the holder of a Lease it never read; the
// elector would renew it with nothing to update until it expired.
//
// A version held elsewhere that expired by the watch (WatchedLease) is
// shown released, so that a new elector takes it at once instead of
// waiting a lease duration from its own first sight.
func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, synced := l.lease.lookup()
	var rec *resourcelock.LeaderElectionRecord
	var raw []byte
	var err error
	if l.mine() || !synced || lease != nil && holder(lease) == l.Identity() {
		if rec, raw, err = l.Interface.Get(ctx); err != nil {
			return rec, raw, err
		}
	} else {
		if lease == nil {
			return nil, nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), l.Describe())
		}
		rec, raw = resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec), LeaseRecord(lease)
	}
	if rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() && l.lease.expired(raw, time.Now()) {
		shown := *rec
		shown.HolderIdentity = ""
		return &shown, raw, nil
	}
	return rec, raw, nil
}

// LeaseRecord is the Lease's record as resourcelock.LeaseLock's Get
// returns it raw.
func LeaseRecord(lease *coordinationv1.Lease) []byte {
	raw, _ := json.Marshal(*resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec))
	return raw
}
