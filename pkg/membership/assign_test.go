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
