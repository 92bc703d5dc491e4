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
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apiserver/pkg/sharding"
	"k8s.io/client-go/tools/cache"
)

// Probe finds out whether the API server applies shard selectors to what lw
// lists: PathServer if it does, PathClient if it ignores them (the gate
// ShardedListAndWatch is off, or the server predates it) or if k cannot be
// selected on the server at all, and "" if it cannot tell yet because lw
// lists nothing.
//
// A list is needed because nothing else tells: client-go's reflector does
// not look at ListMeta.ShardInfo, and with WatchListClient it does not list
// at all, while the bookmark that ends a streaming list's initial events is
// a bare object of the kind, with no ListMeta to carry ShardInfo. ShardInfo
// alone does not tell either: the server sets it only on lists of built-in
// types; a custom resource's list (unstructured) and a metadata-only list
// come without it even when the server filtered them.
//
// So the probe lists one object of a canary range that holds no object in
// practice, a single hash: a server that applies the selector answers with
// an empty list (or echoes it), one that ignores it with an object. An empty
// answer is told apart from an empty collection by one more list of one
// object, without a selector.
func Probe(ctx context.Context, lw cache.ListerWatcherWithContext, k Key) (string, error) {
	if !k.Serverside() {
		return PathClient, nil
	}
	canary := canarySelector(k)
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 1, ShardSelector: canary})
	if err != nil {
		return "", fmt.Errorf("probing whether the API server applies shard selectors: %w", err)
	}
	if honoured(list, canary) {
		return PathServer, nil
	}
	if meta.LenList(list) > 0 {
		return PathClient, nil
	}
	list, err = lw.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", fmt.Errorf("probing whether the API server applies shard selectors: %w", err)
	}
	if meta.LenList(list) == 0 {
		return "", nil
	}
	return PathServer, nil
}

// canarySelector selects the one hash 0 of k: no object, in practice.
func canarySelector(k Key) string {
	return apisharding.NewSelector(apisharding.ShardRangeRequirement{
		Key: k.field, Start: "0x0000000000000000", End: "0x0000000000000001"}).String()
}

// honoured reports whether list is the API server's answer to selector, not
// the whole collection: only a server that applied the selector echoes it
// in ListMeta.ShardInfo (and only on a built-in type's typed list). The echo
// is parsed with the server's own parser and compared range by range, so
// that a change in its formatting does not read as "ignored".
func honoured(list runtime.Object, selector string) bool {
	sl, ok := list.(metav1.ShardedListInterface)
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
