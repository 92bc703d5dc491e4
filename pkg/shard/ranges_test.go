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

package shard

import (
	"fmt"
	"math/big"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/sharding"
)

// hexValue parses the API server's hex form, 2^64 included.
func hexValue(t *testing.T, s string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(s[2:], 16)
	if !ok || s[:2] != "0x" {
		t.Fatalf("%q is not 0x-prefixed hex", s)
	}
	return v
}

// The ranges of every count start at 0, end at 2^64, and meet end to start:
// the whole space, no gap, no overlap, and no range more than one hash
// larger than another.
func TestAllCoverTheHashSpace(t *testing.T) {
	space := new(big.Int).Lsh(big.NewInt(1), 64)
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 16, 100, 1000} {
		shards, err := All(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(shards) != n {
			t.Fatalf("All(%d) gave %d shards", n, len(shards))
		}
		if shards[0].start != "0x0000000000000000" || shards[n-1].end != "0x10000000000000000" {
			t.Errorf("%d shards span [%s, %s), want [0x0000000000000000, 0x10000000000000000)", n, shards[0].start, shards[n-1].end)
		}
		minSize, maxSize := new(big.Int).Set(space), new(big.Int)
		for i, s := range shards {
			if s.Index != i || s.Count != n {
				t.Errorf("shard %d of %d is %s", i, n, s)
			}
			size := new(big.Int).Sub(hexValue(t, s.end), hexValue(t, s.start))
			if size.Sign() <= 0 {
				t.Errorf("shard %s is empty: [%s, %s)", s, s.start, s.end)
			}
			if size.Cmp(minSize) < 0 {
				minSize = size
			}
			if size.Cmp(maxSize) > 0 {
				maxSize = size
			}
			if i+1 < n && s.end != shards[i+1].start {
				t.Errorf("shard %s ends at %s but %s starts at %s", s, s.end, shards[i+1], shards[i+1].start)
			}
		}
		if new(big.Int).Sub(maxSize, minSize).Cmp(big.NewInt(1)) > 0 {
			t.Errorf("%d shards differ in size by more than one hash: %s to %s", n, minSize, maxSize)
		}
	}
}

func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{1, []string{"0x0000000000000000", "0x10000000000000000"}},
		{2, []string{"0x0000000000000000", "0x8000000000000000", "0x10000000000000000"}},
		{3, []string{"0x0000000000000000", "0x5555555555555555", "0xaaaaaaaaaaaaaaaa", "0x10000000000000000"}},
		// The 4-shard split of the ListOptions.ShardSelector documentation.
		{4, []string{"0x0000000000000000", "0x4000000000000000", "0x8000000000000000", "0xc000000000000000", "0x10000000000000000"}},
	} {
		shards, _ := All(tc.n)
		for i, s := range shards {
			if s.start != tc.want[i] || s.end != tc.want[i+1] {
				t.Errorf("shard %s is [%s, %s), want [%s, %s)", s, s.start, s.end, tc.want[i], tc.want[i+1])
			}
		}
	}
}

// The lower bound is in the range, the upper one is not; the last range holds
// the largest hash.
func TestContainsAtTheBoundaries(t *testing.T) {
	shards, _ := All(4)
	for _, tc := range []struct {
		hash string
		in   int
	}{
		{"0x0000000000000000", 0},
		{"0x3fffffffffffffff", 0},
		{"0x4000000000000000", 1},
		{"0x7fffffffffffffff", 1},
		{"0x8000000000000000", 2},
		{"0xbfffffffffffffff", 2},
		{"0xc000000000000000", 3},
		{"0xffffffffffffffff", 3},
	} {
		for _, s := range shards {
			if got := s.containsHash(hexValue(t, tc.hash).Uint64()); got != (s.Index == tc.in) {
				t.Errorf("shard %s contains %s: %v, want it only in shard %d", s, tc.hash, got, tc.in)
			}
		}
	}
}

func TestNewRejectsBadShards(t *testing.T) {
	for _, tc := range [][2]int{{0, 0}, {-1, 2}, {2, 2}, {3, 2}} {
		if _, err := New(tc[0], tc[1]); err == nil {
			t.Errorf("New(%d, %d) succeeded", tc[0], tc[1])
		}
	}
	if _, err := All(0); err == nil {
		t.Error("All(0) succeeded")
	}
}

// Every value is in exactly one shard of every count.
func TestEveryValueInExactlyOneShard(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8} {
		shards, _ := All(n)
		for v := range 2000 {
			value := "ns-" + strconv.Itoa(v)
			in := 0
			for _, s := range shards {
				if s.ContainsNamespace(value) {
					in++
				}
			}
			if in != 1 {
				t.Fatalf("%q is in %d of %d shards", value, in, n)
			}
		}
	}
}

// The selectors parse with the API server's parser into the shard's range,
// and the server's matching agrees with the client's predicate.
func TestSelectorMatchesAsTheServerDoes(t *testing.T) {
	for _, n := range []int{2, 3, 4, 7} {
		shards, _ := All(n)
		for _, s := range shards {
			for _, k := range []Key{UID} { // the keys the server selects by
				sel := s.Selector(k)
				parsed, err := sharding.Parse(sel)
				if err != nil {
					t.Fatalf("the API server's parser rejects shard %s's selector %q: %v", s, sel, err)
				}
				if parsed.String() != sel {
					t.Errorf("selector %q parses and formats as %q", sel, parsed.String())
				}
				want := fmt.Sprintf("shardRange(%s, '%s', '%s')", k.field, s.start, s.end)
				if sel != want {
					t.Errorf("selector %q, want %q", sel, want)
				}
				for v := range 200 {
					obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
						Namespace: "ns-" + strconv.Itoa(v), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", v))}}
					server, err := parsed.Matches(obj)
					if err != nil {
						t.Fatal(err)
					}
					if client := s.Predicate(k)(obj); client != server {
						t.Errorf("shard %s by %s: the client says %v for %s/%s, the server %v", s, k, client, obj.Namespace, obj.UID, server)
					}
				}
			}
		}
	}
}

// One shard, or a key the server cannot select by, sends no selector.
func TestNoSelector(t *testing.T) {
	one, _ := New(0, 1)
	if sel := one.Selector(UID); sel != "" {
		t.Errorf("--shards=1 sends selector %q", sel)
	}
	two, _ := New(1, 2)
	for _, k := range []Key{ControllerOwner(), Namespace} {
		if sel := two.Selector(k); sel != "" {
			t.Errorf("the %s key sends selector %q", k, sel)
		}
	}
}
