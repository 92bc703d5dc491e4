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

package membership

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// Every unit is assigned, to a given member, and loads differ by one at most.
func TestAssignBalances(t *testing.T) {
	for units := 0; units <= 40; units++ {
		for members := 1; members <= 9; members++ {
			us, ms := names("unit-", units), names("replica-", members)
			got := Assign(us, ms)
			if len(got) != units {
				t.Fatalf("%d units over %d members: %d assigned", units, members, len(got))
			}
			load := map[string]int{}
			for _, m := range got {
				load[m]++
			}
			lo, hi := units, 0
			for _, m := range ms {
				lo, hi = min(lo, load[m]), max(hi, load[m])
			}
			if hi-lo > 1 {
				t.Fatalf("%d units over %d members: loads %v", units, members, load)
			}
		}
	}
}

// Every replica computes the same assignment, whatever order it lists the
// members and units in.
func TestAssignIgnoresOrder(t *testing.T) {
	us, ms := names("ingress/", 16), names("host_", 5)
	want := Assign(us, ms)
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		r.Shuffle(len(us), func(i, j int) { us[i], us[j] = us[j], us[i] })
		r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		got := Assign(us, ms)
		for u, m := range want {
			if got[u] != m {
				t.Fatalf("unit %s went to %s, then to %s with the lists reordered", u, m, got[u])
			}
		}
	}
}

// When a member joins, few units move: about the joiner's share, never all.
func TestAssignMovesLittleOnAJoin(t *testing.T) {
	for _, tc := range []struct{ units, members int }{{4, 1}, {4, 2}, {8, 3}, {16, 3}, {64, 4}, {256, 7}} {
		us := names("unit-", tc.units)
		before := Assign(us, names("replica-", tc.members))
		after := Assign(us, names("replica-", tc.members+1))
		moved := 0
		for u := range before {
			if before[u] != after[u] {
				moved++
			}
		}
		share := (tc.units + tc.members) / (tc.members + 1) // the joiner's share, rounded up
		t.Logf("%d units, %d → %d members: %d moved (the joiner's share %d)", tc.units, tc.members, tc.members+1, moved, share)
		if moved > 2*share {
			t.Errorf("%d units, %d → %d members: %d moved, more than twice the joiner's share %d", tc.units, tc.members, tc.members+1, moved, share)
		}
	}
}

func TestAssignWithoutMembers(t *testing.T) {
	if got := Assign([]string{"a"}, nil); len(got) != 0 {
		t.Fatalf("Assign with no members = %v, want nothing assigned", got)
	}
}

// holdings lists, per member, the units an assignment gives it.
func holdings(a map[string]string) map[string][]string {
	held := map[string][]string{}
	for u, m := range a {
		held[m] = append(held[m], u)
	}
	return held
}

// When a member leaves, the survivors keep every unit they hold: only the
// leaver's units move, and the loads still differ by one at most. (Assign
// alone moved 4 to 12% of the survivors' units, swapping them for nothing.)
func TestAssignKeepingLeavesSurvivorsTheirUnits(t *testing.T) {
	for _, tc := range []struct{ units, members int }{{3, 3}, {4, 3}, {8, 3}, {12, 3}, {16, 4}, {64, 3}, {64, 7}} {
		for trial := range 20 {
			us, ms := names("unit-", tc.units), names(fmt.Sprintf("replica-%d-", trial), tc.members)
			before := AssignKeeping(us, ms, nil)
			for gone := range ms {
				survivors := append(append([]string{}, ms[:gone]...), ms[gone+1:]...)
				held := holdings(before)
				delete(held, ms[gone])
				after := AssignKeeping(us, survivors, held)
				load := map[string]int{}
				for u, m := range after {
					load[m]++
					if was := before[u]; was != ms[gone] && was != m {
						t.Fatalf("%d units, %d members, %s leaves: %s moved from survivor %s to %s", tc.units, tc.members, ms[gone], u, was, m)
					}
				}
				if len(after) != tc.units {
					t.Fatalf("%d of %d units assigned", len(after), tc.units)
				}
				lo, hi := tc.units, 0
				for _, m := range survivors {
					lo, hi = min(lo, load[m]), max(hi, load[m])
				}
				if hi-lo > 1 {
					t.Fatalf("%d units over %d survivors: loads %v", tc.units, len(survivors), load)
				}
			}
		}
	}
}

// When a member joins, it takes its share and nothing else moves.
func TestAssignKeepingMovesOnlyTheJoinersShare(t *testing.T) {
	for _, tc := range []struct{ units, members int }{{4, 1}, {4, 2}, {8, 3}, {16, 3}, {64, 4}, {256, 7}} {
		us := names("unit-", tc.units)
		ms := names("replica-", tc.members)
		before := AssignKeeping(us, ms, nil)
		joined := append(ms, "replica-new")
		after := AssignKeeping(us, joined, holdings(before))
		moved := 0
		for u := range before {
			if before[u] != after[u] {
				moved++
				if after[u] != "replica-new" {
					t.Errorf("%s moved from %s to %s, not to the joiner", u, before[u], after[u])
				}
			}
		}
		if share := tc.units / len(joined); moved < share || moved > share+1 {
			t.Errorf("%d units, %d → %d members: %d moved; want the joiner's share, %d or %d", tc.units, tc.members, len(joined), moved, share, share+1)
		}
	}
}

// A unit two members claim (a handover not yet announced) is placed once.
func TestAssignKeepingPlacesADoubleClaimOnce(t *testing.T) {
	got := AssignKeeping([]string{"u1", "u2"}, []string{"a", "b"}, map[string][]string{"a": {"u1"}, "b": {"u1", "u2"}})
	if got["u1"] != "a" || got["u2"] != "b" {
		t.Fatalf("got %v; want u1 on a (first in order), u2 on b", got)
	}
}
