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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/sharding"
)

// rangesOf reads every selector of this package, and the ways the API
// server might write one back, into the ranges the server's own parser finds.
func TestRangesOfAgreesWithTheServersParser(t *testing.T) {
	var selectors []string
	for _, n := range []int{2, 3, 4, 7} {
		shards, _ := All(n)
		for _, s := range shards {
			for _, k := range []Key{UID} {
				selectors = append(selectors, s.Selector(k))
			}
		}
	}
	selectors = append(selectors,
		canarySelector(UID),
		`shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')`,
		`shardRange(object.metadata.uid, "0x0000000000000000", "0x8000000000000000")`,
		`shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0xc000000000000000')`,
	)
	for _, sel := range selectors {
		parsed, err := sharding.Parse(sel)
		if err != nil {
			t.Fatalf("the API server's parser rejects %q: %v", sel, err)
		}
		got, ok := rangesOf(sel)
		if !ok {
			t.Fatalf("rangesOf(%q) does not read it", sel)
		}
		want := parsed.Requirements()
		if len(got) != len(want) {
			t.Fatalf("rangesOf(%q) = %v, the server's parser %v", sel, got, want)
		}
		for i := range want {
			if want[i].Key != got[i].Key || !strings.EqualFold(want[i].Start, got[i].Start) || !strings.EqualFold(want[i].End, got[i].End) {
				t.Errorf("rangesOf(%q) = %v, the server's parser %v", sel, got, want)
			}
		}
	}
	for _, bad := range []string{"", "shardRange(object.metadata.uid)", "object.metadata.uid in ('a')",
		"shardRange(object.metadata.uid, '0x0', '0x8') && shardRange(object.metadata.uid, '0x0', '0x4')"} {
		if r, ok := rangesOf(bad); ok {
			t.Errorf("rangesOf(%q) = %v, want it unread", bad, r)
		}
	}
}

// The echo of the selector sent is honoured, whatever its spacing; another
// range, or no echo, is not.
func TestHonoured(t *testing.T) {
	sel := canarySelector(UID)
	list := func(echo string) *metav1.PartialObjectMetadataList {
		l := &metav1.PartialObjectMetadataList{}
		if echo != "" {
			l.ShardInfo = &metav1.ShardInfo{Selector: echo}
		}
		return l
	}
	if !honoured(list(sel), sel) {
		t.Errorf("the exact echo of %q is not honoured", sel)
	}
	if !honoured(list(`shardRange(object.metadata.uid,"0x0000000000000000","0x0000000000000001")`), sel) {
		t.Errorf("an echo of %q with other quotes and spacing is not honoured", sel)
	}
	if honoured(list(`shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`), sel) {
		t.Errorf("an echo of another range is honoured")
	}
	if honoured(list(""), sel) {
		t.Errorf("a list without an echo is honoured")
	}
}
