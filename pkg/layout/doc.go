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

// Package layout keeps replicas that divide the work into Leases
// differently from leading at once.
//
// A layout is how a replica's flags cut the controllers into units, each
// under a Lease of its own name: one Lease for all (Single), one per
// controller (PerController), or N shards of the shardable controllers
// placed by keys of a version ("4-shards.keys-v2"). Two layouts name their
// Leases differently, so the Leases alone cannot keep them apart: during a
// rolling update that changes --leader-elect-per-controller or --shards,
// a replica of each would lead the same objects.
//
// # What is stated
//
//   - Every unit Lease is labelled with its group (GroupLabel, the leader
//     election resource name) and the layout it was written under (Label);
//     every member Lease states its replica's layout too.
//   - The group's fence, the Lease <group>-layout, states the layout that
//     leads (Label). It is written with the resourceVersion last seen, so
//     two replicas never both change it from the same state.
//   - Leases written before layouts were stated are classified by their
//     names (LegacyNames).
//
// # Invariants
//
//  1. A replica acquires a Lease only while the fence states its layout and
//     no unit Lease of another layout is live, and only after a read of the
//     fence from the API server, made after the acquisition was written,
//     still states its layout; else it releases the Lease, never having led.
//  2. A replica renews only while the fence states its layout (or none).
//     A replica fenced out stops leading within the renew deadline, as for
//     any Lease it cannot renew (pkg/leaseguard).
//  3. A replica states its layout only when no unit Lease of another layout
//     is live and no replica of another layout is a live member, and it
//     acquires only after its own watch of the namespace's Leases has shown
//     the change.
//
// "Live" is judged as client-go judges a holder: a Lease this replica has
// not seen change for a lease duration, on its own clock, is not live.
//
// Why no two layouts lead at once. Say layout B states itself (write w)
// while a replica of layout A acquires a Lease (write a). If a comes after
// w, A's read of the fence after a shows B, and A releases (1). If a comes
// before w, B's watch delivers a before w, so once B's view shows w (3) it
// also shows A's Lease live, and B acquires nothing (1) until A's Lease has
// not changed for a lease duration; A stops renewing once it sees w (2), and
// stops writing within its renew deadline, before that.
//
// The old layout keeps leading while any of its replicas runs (a standby
// member, or a replica that takes a Lease another releases); the new one
// takes over at its next try after the last Lease of the old one is
// released, or a lease duration after it was last renewed.
//
// # Versions before layouts
//
// Their replicas know no fence, and name their Leases <group>,
// <group>-<controller> and <group>-<controller>-<i>. While a layout leads,
// its replicas hold every such Lease of another layout that is not live
// for it (a tombstone: the holder "(fenced: layout … leads)", renewed
// every third of the lease duration), written on the version seen, so that
// a replica of such a version that takes it meanwhile wins and is waited
// for. So a replica of an earlier version, started by a rollback beside
// this layout's, waits as for a live holder, and takes its Lease a lease
// duration after the last replica of this layout is gone. A replica of
// this version whose layout leads sees a tombstone as released.
package layout
