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

package app

import (
	"context"
	"encoding/json"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// watchedLock reads a unit's Lease from the watch this replica keeps on it
// (leaseWatch) instead of the API server while membership assigns the
// unit elsewhere. Every replica runs an elector for every unit, and an
// elector that does not hold its Lease reads it every retry period: with
// --shards, those reads crowded the client that renews the Leases held here
// (issue 36). The elector judges a Lease by when it saw it change, which
// the watch tells as well as a read. While the unit is assigned here, reads
// go to the API server, so an acquisition updates the Lease as it is.
type watchedLock struct {
	resourcelock.Interface
	// lookup returns the Lease as last watched, and whether the watch has
	// synced (nil, true: there is no such Lease).
	lookup func() (*coordinationv1.Lease, bool)
	mine   func() bool
}

// A Lease the watch shows held by this replica is read from the API server
// too: the lock renews and releases the object it last read, and an
// acquisition whose answer was lost (its attempt cancelled by a release
// wake) leaves this replica the holder of a Lease it never read; the
// elector would renew it with nothing to update until it expired.
func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, synced := l.lookup()
	if l.mine() || !synced || lease != nil && holder(lease) == l.Identity() {
		return l.Interface.Get(ctx)
	}
	if lease == nil {
		return nil, nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), l.Describe())
	}
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}
