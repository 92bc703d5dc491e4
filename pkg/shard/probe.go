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
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apisharding "k8s.io/apimachinery/pkg/sharding"
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
// is compared range by range, not as text, so that a change in the server's
// spacing or quoting does not read as "ignored"; an echo that does not
// parse reads as ignored, and the client then filters, which is always safe.
func honoured(list runtime.Object, selector string) bool {
	sl, ok := list.(metav1.ShardedListInterface)
	if !ok || sl.GetShardInfo() == nil {
		return false
	}
	got, ok := rangesOf(sl.GetShardInfo().Selector)
	if !ok {
		return false
	}
	want, ok := rangesOf(selector)
	return ok && slices.Equal(got, want)
}

// shardRangeTerm is one term of a shard selector, as the API server writes
// it: shardRange(<field path>, '<hex start>', '<hex end>').
var shardRangeTerm = regexp.MustCompile(`^\s*shardRange\(\s*([A-Za-z0-9_.]+)\s*,\s*['"](0[xX][0-9a-fA-F]+)['"]\s*,\s*['"](0[xX][0-9a-fA-F]+)['"]\s*\)\s*$`)

// rangesOf reads the ranges of a shard selector, the terms joined by "||",
// with the hex digits in lower case. It is a reader for this package's own
// selectors and their echo, not a parser of every selector the API server
// accepts (k8s.io/apiserver/pkg/sharding, which brings CEL into the binary).
func rangesOf(selector string) ([]apisharding.ShardRangeRequirement, bool) {
	var ranges []apisharding.ShardRangeRequirement
	for term := range strings.SplitSeq(selector, "||") {
		m := shardRangeTerm.FindStringSubmatch(term)
		if m == nil {
			return nil, false
		}
		ranges = append(ranges, apisharding.ShardRangeRequirement{
			Key: m[1], Start: strings.ToLower(m[2]), End: strings.ToLower(m[3])})
	}
	return ranges, len(ranges) > 0
}
