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

import "testing"

func TestDivisionCounts(t *testing.T) {
	for _, tc := range []struct {
		by       map[string][]string
		replicas int
		want     string
	}{
		{map[string][]string{"a": {"app", "ingress"}, "b": {"pipeline"}, "c": {"cleanup"}}, 3, "2-1-1"},
		{map[string][]string{"b": {"ingress", "pipeline"}, "c": {"app", "cleanup"}}, 2, "2-2"},
		{map[string][]string{"b": {"app", "cleanup", "ingress"}, "c": {"pipeline"}}, 2, "3-1"},
		{map[string][]string{"a": {"app", "cleanup", "ingress", "pipeline"}}, 3, "4-0-0"},
	} {
		if got := divisionCounts(tc.by, tc.replicas); got != tc.want {
			t.Errorf("divisionCounts(%v, %d) = %s, want %s", tc.by, tc.replicas, got, tc.want)
		}
	}
	if got, want := divisionString(map[string][]string{"m2": {"pipeline"}, "m1": {"app", "ingress"}}), "m1: app,ingress; m2: pipeline"; got != want {
		t.Errorf("divisionString = %q, want %q", got, want)
	}
}

func TestParseFloodSizes(t *testing.T) {
	if got, err := parseFloodSizes("2000, 20000"); err != nil || len(got) != 2 || got[0] != 2000 || got[1] != 20000 {
		t.Errorf("parseFloodSizes(2000, 20000) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1", "20000,2000", "x", "-5"} {
		if _, err := parseFloodSizes(bad); err == nil {
			t.Errorf("parseFloodSizes(%q) succeeded", bad)
		}
	}
}
