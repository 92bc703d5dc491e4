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
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errNotAssigned refuses to acquire a controller's Lease on a replica the
// membership did not assign it to.
var errNotAssigned = errors.New("the controller is assigned to another replica")

// assignedElsewhere stands for the holder of a released Lease that this
// replica may not take: its elector then waits, as for a held Lease,
// instead of trying and logging a refusal every retry period.
const assignedElsewhere = "(released; assigned to another replica)"

// assignedElsewhereSeconds is the lease duration shown with it: a day,
// that is, until the real record shows again.
const assignedElsewhereSeconds = 24 * 60 * 60

// assignedLock lets the elector acquire a controller's Lease only while
// membership assigns the controller to this replica. Renewals and the
// release on shutdown or handover always pass. The elector keeps reading
// the Lease meanwhile, so that, once the controller is assigned here, it
// judges a dead holder's Lease by what it saw all along (by this replica's
// clock) and takes it as soon as it expires.
type assignedLock struct {
	resourcelock.Interface
	mine func() bool

	mu      sync.Mutex
	holding bool // the last read or write named this replica
}

// AssignedLock wraps inner so that it acquires only while mine says the
// unit is assigned here.
func AssignedLock(inner resourcelock.Interface, mine func() bool) resourcelock.Interface {
	return &assignedLock{Interface: inner, mine: mine}
}

func (l *assignedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		l.setHolding(false)
	case err != nil:
	default:
		l.setHolding(rec.HolderIdentity == l.Identity())
		if rec.HolderIdentity == "" && !l.mine() {
			shown := *rec
			shown.HolderIdentity = assignedElsewhere
			// Held, for as long as it is shown so: a released Lease says
			// 1 s, after which the elector would try, and be refused,
			// every retry period, logging each refusal as an error.
			shown.LeaseDurationSeconds = assignedElsewhereSeconds
			// Marked so that the elector sees a change, and a fresh
			// Lease, when the real record shows again.
			return &shown, append(raw[:len(raw):len(raw)], assignedElsewhere...), nil
		}
	}
	return rec, raw, err
}

func (l *assignedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if !l.mine() {
		return errNotAssigned
	}
	return l.write(l.Interface.Create(ctx, ler), ler)
}

func (l *assignedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	holding := l.holding
	l.mu.Unlock()
	if ler.HolderIdentity == l.Identity() && !holding && !l.mine() {
		return errNotAssigned
	}
	return l.write(l.Interface.Update(ctx, ler), ler)
}

// write records whether a successful write left this replica the holder:
// the elector renews without reading first.
func (l *assignedLock) write(err error, ler resourcelock.LeaderElectionRecord) error {
	if err == nil {
		l.setHolding(ler.HolderIdentity == l.Identity())
	}
	return err
}

func (l *assignedLock) setHolding(h bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holding = h
}
