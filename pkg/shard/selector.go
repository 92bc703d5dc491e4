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
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apiserver/pkg/sharding"
	"k8s.io/client-go/tools/cache"
)

// Selector is the ListOptions.ShardSelector that asks the API server for s's
// range of k, such as
// "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
// formatted by apimachinery; "" when the server cannot select by k or there
// is a single shard (--shards=1 sends what it always sent).
func (s Shard) Selector(k Key) string {
	if !k.Serverside() || s.Count == 1 {
		return ""
	}
	return apisharding.NewSelector(s.requirement(k.field)).String()
}

// Keeps returns whether an object belongs to s by k.
func (s Shard) Keeps(k Key) func(obj metav1.Object) bool {
	return func(obj metav1.Object) bool { return s.Contains(k.value(obj)) }
}

// Predicate is Keeps for what an event handler receives: an object or the
// tombstone of one. What has no object metadata is kept: no shard could
// place it.
func (s Shard) Predicate(k Key) func(obj any) bool {
	keeps := s.Keeps(k)
	return func(obj any) bool {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		o, err := meta.Accessor(obj)
		if err != nil {
			return true
		}
		return keeps(o)
	}
}

// shardedList is the part of a list that says whether the API server applied
// a shard selector (metav1.ListMeta implements it).
type shardedList interface {
	GetShardInfo() *metav1.ShardInfo
}

// honoured reports whether list is the API server's answer to selector, not
// the whole collection: only a server that applied the selector echoes it
// in ListMeta.ShardInfo. The echo is parsed with the server's own parser and
// compared range by range, so that a change in its formatting does not read
// as "ignored".
func honoured(list runtime.Object, selector string) bool {
	sl, ok := list.(shardedList)
	if !ok || sl.GetShardInfo() == nil {
		return false
	}
	got, err := sharding.Parse(sl.GetShardInfo().Selector)
	if err != nil {
		return false
	}
	want, err := sharding.Parse(selector)
	if err != nil {
		return false
	}
	return slices.Equal(got.Requirements(), want.Requirements())
}
