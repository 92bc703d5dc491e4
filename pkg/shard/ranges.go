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
	"math/bits"

	apisharding "k8s.io/apimachinery/pkg/sharding"
)

// hashSpaceEnd is 2^64, the exclusive upper bound of the last range, in the
// one 17-digit form the API server's parser accepts.
const hashSpaceEnd = "0x10000000000000000"

// Shard is shard Index of Count: the Index-th of Count contiguous ranges of
// the 64-bit hash space, [Index*2^64/Count, (Index+1)*2^64/Count).
type Shard struct {
	Index, Count int
	// lo and hi are the range's bounds, hi exclusive; the last range's hi
	// is 2^64, written 0 with last set.
	lo, hi uint64
	last   bool
	// start and end are the same bounds as the API server writes them:
	// 0x and 16 lowercase hex digits, end exclusive and 2^64 for the last.
	start, end string
}

// New returns shard index of count, count being --shards.
func New(index, count int) (Shard, error) {
	if count < 1 || index < 0 || index >= count {
		return Shard{}, fmt.Errorf("shard %d of %d: want 0 <= index < count", index, count)
	}
	s := Shard{Index: index, Count: count, lo: bound(index, count), last: index+1 == count, end: hashSpaceEnd}
	s.start = hex(s.lo)
	if !s.last {
		s.hi = bound(index+1, count)
		s.end = hex(s.hi)
	}
	return s, nil
}

// All returns the count shards of --shards=count, in order.
func All(count int) ([]Shard, error) {
	if count < 1 {
		return nil, fmt.Errorf("%d shards: want at least one", count)
	}
	shards := make([]Shard, count)
	for i := range shards {
		shards[i], _ = New(i, count)
	}
	return shards, nil
}

// bound is floor(i * 2^64 / n) for 0 <= i < n. Integer division spreads
// the remainder so that no range is more than one hash larger than another.
func bound(i, n int) uint64 {
	q, _ := bits.Div64(uint64(i), 0, uint64(n))
	return q
}

// hex is h in the API server's form.
func hex(h uint64) string { return fmt.Sprintf("0x%016x", h) }

// ContainsNamespace reports whether objects of namespace ns are in s by the
// Namespace key.
func (s Shard) ContainsNamespace(ns string) bool { return s.containsHash(namespaceHash(ns)) }

// ContainsUID reports whether the object of uid is in s by the UID key.
func (s Shard) ContainsUID(uid string) bool { return s.containsHash(uidHash(uid)) }

// containsHash reports whether h is in [lo, hi).
func (s Shard) containsHash(h uint64) bool {
	return h >= s.lo && (s.last || h < s.hi)
}

// requirement is s as a shard range over field, e.g.
// "object.metadata.namespace".
func (s Shard) requirement(field string) apisharding.ShardRangeRequirement {
	return apisharding.ShardRangeRequirement{Key: field, Start: s.start, End: s.end}
}

// String names the shard for logs and metrics, e.g. "1/4".
func (s Shard) String() string {
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}
