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

package ha

import (
	"context"

	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/pkg/membership"
)

// Controllers is what the runner asks of the manager: sets of built units
// to start, run and stop, and a place to say what this replica leads. The
// runner decides when; the manager knows how.
type Controllers interface {
	// Start builds units and starts the informers they read, which run
	// until the set's Stop. Whole units share the manager's informers; a
	// shard unit, started alone, gets informers of its own range. Nothing
	// is written before Run. guardFor gives each unit's lease guard, which
	// every client of the unit goes through.
	Start(ctx context.Context, units []Unit, guardFor func(unit string) *leaseguard.Guard) (Set, error)
	// SetLeading records whether this replica leads the named units. It
	// is cleared once they have stopped, before their Lease is released:
	// another replica may say it leads them right after.
	SetLeading(units []string, leading bool)
	// SetLease records the Lease a unit runs under (per-controller mode).
	SetLease(unit, lease string)
	// SetMembers records the membership of per-controller mode; the
	// manager offers it each unit once that unit's caches have synced.
	SetMembers(members *membership.Members, identity string)
}

// Set is a set of built units whose informers run.
type Set interface {
	// Run runs the named units' workers until ctx is done or drain is
	// closed. ctx done means the Lease is gone: the reconciles in flight
	// are cancelled and Run returns within LeaseLostGrace. drain closed
	// means a graceful stop: the workers take no new key and the
	// reconciles in flight may finish.
	Run(ctx context.Context, drain <-chan struct{}, units []string)
	// Rebuild builds a unit again on the running informers after it
	// stopped (its queue is shut down); they replay their caches to its
	// new handlers.
	Rebuild(ctx context.Context, unit string) error
	// Synced says whether the informers the unit reads have synced.
	Synced(unit string) bool
	// Stop stops the informers and what the units registered on them.
	Stop()
}
