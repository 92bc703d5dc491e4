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

package main

import (
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestBalancedNamespaces(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ count, shards int }{{128, 1}, {128, 2}, {128, 4}, {130, 4}, {7, 3}} {
		names := balancedNamespaces(rng, tc.count, tc.shards)
		if len(names) != tc.count {
			t.Fatalf("%d of %d shards: got %d names", tc.count, tc.shards, len(names))
		}
		seen := map[string]bool{}
		for _, n := range names {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				t.Errorf("%q is no namespace name: %v", n, errs)
			}
			if seen[n] {
				t.Errorf("%q twice", n)
			}
			seen[n] = true
		}
		// One App per namespace: the shards hold as many namespaces, ±1.
		per := appsPerShard(names, tc.count, tc.shards)
		if lo, hi := slices.Min(per), slices.Max(per); hi-lo > 1 {
			t.Errorf("%d names in %d shards: %v, not even", tc.count, tc.shards, per)
		}
	}
}

func TestSettledDivision(t *testing.T) {
	assigned := func(ids ...string) map[string]string {
		m := map[string]string{}
		for i, id := range ids {
			m[[]string{"app-0", "app-1", "app-2"}[i]] = id
		}
		return m
	}
	view := func(name, id string, members []string, leads []string, as map[string]string) replicaView {
		return replicaView{name: name, identity: id, members: members, synced: true, leads: leads, assigned: as}
	}
	all := []string{"a", "b"}
	for _, tc := range []struct {
		name    string
		views   []replicaView
		led     bool
		settled bool
	}{
		{"each unit led by its assignee", []replicaView{
			view("m1", "a", all, []string{"app-0", "app-2"}, assigned("a", "b", "a")),
			view("m2", "b", all, []string{"app-1"}, assigned("a", "b", "a")),
		}, true, true},
		{"a unit not led", []replicaView{
			view("m1", "a", all, []string{"app-0"}, assigned("a", "b", "a")),
			view("m2", "b", all, []string{"app-1"}, assigned("a", "b", "a")),
		}, false, false},
		{"a unit led twice (a handover between polls)", []replicaView{
			view("m1", "a", all, []string{"app-0", "app-1", "app-2"}, assigned("a", "b", "a")),
			view("m2", "b", all, []string{"app-1"}, assigned("a", "b", "a")),
		}, false, false},
		{"led, but not yet by the assignee", []replicaView{
			view("m1", "a", all, []string{"app-0", "app-1", "app-2"}, assigned("a", "b", "a")),
			view("m2", "b", all, nil, assigned("a", "b", "a")),
		}, true, false},
		{"a joiner not yet a member everywhere", []replicaView{
			view("m1", "a", all, []string{"app-0", "app-2"}, assigned("a", "b", "a")),
			view("m2", "b", all, []string{"app-1"}, assigned("a", "b", "a")),
			view("m3", "c", []string{"a", "b", "c"}, nil, assigned("a", "b", "a")),
		}, true, false},
		{"assigned unevenly", []replicaView{
			view("m1", "a", all, []string{"app-0", "app-1", "app-2"}, assigned("a", "a", "a")),
			view("m2", "b", all, nil, assigned("a", "a", "a")),
		}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := unitsLed(tc.views); ok != tc.led {
				t.Errorf("unitsLed = %v, want %v", ok, tc.led)
			}
			led, ok := settledDivision(tc.views)
			if ok != tc.settled {
				t.Errorf("settledDivision = %v, %v; want %v", led, ok, tc.settled)
			}
		})
	}
}

func TestParseShardsReplicas(t *testing.T) {
	if got, err := parseShardsReplicas("1, 2,4"); err != nil || !slices.Equal(got, []int{1, 2, 4}) {
		t.Errorf("parseShardsReplicas(1, 2,4) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "65", "2,2", "x"} {
		if _, err := parseShardsReplicas(bad); err == nil {
			t.Errorf("parseShardsReplicas(%q) succeeded", bad)
		}
	}
}

func TestMaxMean(t *testing.T) {
	if hi, mean := maxMean([]float64{1, 3, 2}); hi != 3 || mean != 2 {
		t.Errorf("maxMean = %v, %v", hi, mean)
	}
	if hi, mean := maxMean(nil); hi != 0 || mean != 0 {
		t.Errorf("maxMean(nil) = %v, %v", hi, mean)
	}
}
