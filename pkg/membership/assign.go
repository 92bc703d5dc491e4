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

// Package membership lets the replicas of one manager share units of work
// (a controller, or one shard of a controller) evenly. Each replica announces
// itself with a member Lease it renews; every replica watches the member
// Leases, judges which members are live by when it saw their Leases change
// (never by their clocks), and computes the same assignment of units to
// live members. A unit's own Lease still guards its writes: membership only
// decides which replica tries for it and which one hands it back.
package membership

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strings"
)

// Assign maps each unit to one member, the same on every replica given the
// same members, in any order. Members get len(units)/len(members) units, or
// one more: a unit goes to the member that ranks it highest (rendezvous
// hashing) among those with room left. So when a member joins or leaves,
// mostly the units that must move do. No members, no assignment.
func Assign(units, members []string) map[string]string {
	return AssignKeeping(units, members, nil)
}

// AssignKeeping is Assign that first leaves each member the units held
// lists for it, as many as its share allows (those it ranks highest), and
// places only the others: when a member leaves, the survivors keep every
// unit they hold and share its units; when one joins, it takes its share
// from those above theirs. A unit two members claim stays with the first
// in sorted order.
func AssignKeeping(units, members []string, held map[string][]string) map[string]string {
	if len(members) == 0 {
		return map[string]string{}
	}
	members = slices.Clone(members)
	slices.Sort(members)
	members = slices.Compact(members)
	units = slices.Clone(units)
	slices.Sort(units)
	units = slices.Compact(units)

	base, extra := len(units)/len(members), len(units)%len(members)
	load := make(map[string]int, len(members))
	full := 0 // members that took base+1
	out := make(map[string]string, len(units))
	take := func(u, m string) bool {
		room := base
		if full < extra {
			room = base + 1
		}
		if load[m] >= room {
			return false
		}
		load[m]++
		if load[m] == base+1 {
			full++
		}
		out[u] = m
		return true
	}
	for _, m := range members {
		var keep []string
		for _, u := range held[m] {
			if _, placed := out[u]; !placed && slices.Contains(units, u) {
				keep = append(keep, u)
			}
		}
		slices.SortFunc(keep, func(a, b string) int { return byScore(m, a, b) })
		for _, u := range keep {
			if !take(u, m) {
				break
			}
		}
	}
	ranked := make([]string, len(members))
	for _, u := range units {
		if _, placed := out[u]; placed {
			continue
		}
		copy(ranked, members)
		slices.SortStableFunc(ranked, func(a, b string) int { return cmp.Compare(score(b, u), score(a, u)) })
		for _, m := range ranked {
			if take(u, m) {
				break
			}
		}
	}
	return out
}

// byScore orders units a and b by how member ranks them, highest first,
// then by name.
func byScore(member, a, b string) int {
	if c := cmp.Compare(score(member, b), score(member, a)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// score ranks a member for a unit; ties (a 64-bit collision) keep the
// sorted member order, so every replica still agrees.
func score(member, unit string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(unit))
	return mix(h.Sum64())
}

// mix spreads FNV's output (whose high bits vary little between close
// inputs) over the whole range (the finalizer of SplitMix64).
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
