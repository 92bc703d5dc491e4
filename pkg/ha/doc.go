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

// Package ha runs a replica's controllers under leader election: one Lease
// for them all, or one per unit (a controller, or a shard of one) shared
// among the replicas by membership. The manager gives it sets of units to
// build, start, run and stop (Controllers, Set); it decides when.
//
// This documentation is the one page of the HA layer's invariants: who may
// write when (pkg/leaseguard), who tries for which unit (pkg/membership),
// how a unit moves (this package), and what a layout change does
// (pkg/layout, where the argument is).
//
// # Where the code is
//
//   - runner.go: Config and Run, which picks the mode.
//   - single.go: the single Lease; a warm or a cold standby.
//   - perunit.go: a Lease per unit; each unit's elector, its term of
//     leading, and what follows a loss, a handover or a failed build.
//   - handover.go: when a unit assigned elsewhere drains.
//   - warm.go: shard units built and synced ahead of taking them.
//   - members.go: joining and leaving membership.
//   - election.go: the Leases' identity, client, budget, locks and fence.
//   - units.go, controllers.go: units, and what the runner asks of the
//     manager.
//   - pkg/leaseguard, pkg/elector, pkg/membership, pkg/layout, pkg/shard,
//     pkg/shardclient: the pieces it stacks.
//
// # Who may write when
//
// Cancelling the controllers' contexts when client-go's leader election
// reports the Lease lost is not enough: a process that was paused (SIGSTOP,
// a long GC or VM stall) resumes with its reconciles in flight, and their
// next request goes out before the election loop has had a chance to notice
// that it has not renewed for a while. The Guard (pkg/leaseguard) sees that.
//
// A write leaves this process only while the last successful acquire or
// renewal of its Lease was SENT less than the renew deadline ago, on this
// process's monotonic clock, and no read since showed another holder and no
// release was written; a write still in flight when that deadline passes is
// cancelled, and the connection it goes over sends no byte past it (a
// process resuming from a pause runs the cancelling timer only after its
// other goroutines may have sent: the connection checks the clock itself). Another replica takes the Lease only after it has seen it
// unchanged for LeaseDurationSeconds on its own clock, counted from when it
// saw that renewal (its elector's read, or its watch's delivery), which is
// after it was sent, or once the holder released it. LeaseDurationSeconds
// is --leader-elect-lease-duration (validated to be whole seconds, so
// client-go writes it untruncated), which is validated to exceed the renew
// deadline: so this process stops writing before anyone else may start. No
// wall clock is compared across replicas; only clock rates are assumed to
// agree, as client-go assumes. Every acquisition is a create, or an update
// on the resourceVersion read, so of two replicas that judge a Lease free
// at once, one fails.
//
// # Who tries for which unit
//
// A unit is what one Lease covers: every controller (one Lease), each
// controller, or each shard of a shardable controller (--shards). Every
// replica runs an elector for every unit of its layout. Membership assigns
// each unit to one live member, from what the member Leases state (the
// units each offers once their caches synced, the units each holds, so
// that survivors keep theirs); only the assignee acquires, while renewals
// and releases always pass. Membership decides only who tries, never who
// may write: replicas that disagree on the assignment both try, and the
// Lease picks one.
//
// # How a unit moves
//
//   - Assigned elsewhere (a join, another's leave): the new assignee builds
//     the unit and syncs its caches first and states it warm; the holder
//     keeps leading until then (at most a lease duration), then stops its
//     workers taking keys, lets the reconciles in flight finish, says it no
//     longer leads, and releases the Lease. The assignee's watch sees the
//     release and its elector tries at once.
//   - SIGTERM: the replica leaves membership at once but keeps following
//     it; each shard it leads drains once the shard's new assignee states
//     it warm (at most a lease duration; at once when no replica is left),
//     and each whole controller, warm on every replica, drains at once;
//     then its Lease is released. The last replica of a layout hands a
//     shard over once the replicas of the next layout, which build theirs
//     while fenced, state them warm (pkg/layout's Fence.OthersWarm; at most
//     a lease duration).
//   - kill -9 or a partition: nothing is released. A survivor drops the
//     member the moment its member Lease has been unchanged for a lease
//     duration since the watch delivered it, and takes a unit assigned to
//     it the moment that unit's Lease has, by the same measure.
//   - A lost Lease (a renewal past the deadline) cancels the unit's
//     reconciles at once; the replica competes again.
//   - A unit that cannot be built releases its Lease and competes again
//     after a backoff.
//
// # What a layout change does
//
// A rolling update that changes --leader-elect-per-controller or --shards
// runs replicas of two layouts side by side, whose Leases cover the same
// objects under other names. The group's fence Lease states the leading
// layout; a replica acquires only while it states its own and no unit
// Lease of another layout is live, renews only while no other is stated,
// and states its own only once no unit Lease or member of another layout
// is live. So at most one layout leads a group at a time: the old one until
// its last replica is gone, then the new one at its next try (pkg/layout).
//
// # Order of the lock wrappers
//
// From the elector inwards, as this package stacks them (the wrappers but
// the Guard's and the fence's are in pkg/elector):
//
//	AssignedLock (per-controller mode only: refuses to acquire a Lease
//	  membership assigns to another replica; renewals and releases pass)
//	→ Guard.Lock (stamps "sent" right before the write, so the hold is
//	  never dated earlier than the write went out)
//	→ Config.WrapLock (tests only: fault injection)
//	→ Attempts.Lock (refuses the writes of an attempt ended by a release wake;
//	  inside the Guard so that a refused write never counts as a renewal)
//	→ pkg/layout's fencedLock (acquires only while this replica's Lease
//	  layout leads the group, renews only while no other does; inside the
//	  Guard for the same reason, and outside WatchedLock so that it sees
//	  what the elector sees)
//	→ WatchedLock (per-controller mode only: reads a Lease assigned
//	  elsewhere from its watch, not the API server, and shows a version
//	  held elsewhere as released once it has been unchanged for its
//	  LeaseDurationSeconds since the watch delivered it, which is the
//	  invariant's "seen unchanged"; writes pass)
//	→ RetryingRelease → client-go's LeaseLock.
package ha
