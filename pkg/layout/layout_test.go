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

package layout

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLayoutNamesAreLabelValues(t *testing.T) {
	for _, tc := range []struct {
		perController bool
		shards        int
		want          string
	}{
		{false, 1, Single},
		{true, 1, PerController},
		{true, 4, "4-shards.keys-v2"},
		{true, 64, "64-shards.keys-v2"},
	} {
		got := Of(tc.perController, tc.shards, 2)
		if got != tc.want {
			t.Errorf("Of(%v, %d, 2) = %q, want %q", tc.perController, tc.shards, got, tc.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("layout %q is no label value: %v", got, errs)
		}
	}
	long := strings.Repeat("g", 100)
	if errs := validation.IsValidLabelValue(Labels(long, Single)[GroupLabel]); len(errs) > 0 {
		t.Errorf("group label value %q: %v", Labels(long, Single)[GroupLabel], errs)
	}
}

// Leases written before layouts are told apart by their names only; the
// group's member Leases, its certificates Lease and other groups' Leases
// are none of them.
func TestLegacyNames(t *testing.T) {
	legacy := LegacyNames("cm", []string{"app", "ingress", "cleanup"})
	for name, want := range map[string]string{
		"cm":               Single,
		"cm-app":           PerController,
		"cm-cleanup":       PerController,
		"cm-app-1":         LegacyShards,
		"cm-ingress-12":    LegacyShards,
		"cm-app-1-of-2":    "",
		"cm-certs":         "",
		"cm-member-0a1b2c": "",
		"cm-app-":          "",
		"cm-app-x":         "",
		"cmx-app":          "",
		"other":            "",
	} {
		got, ok := legacy(name)
		if ok != (want != "") || got != want {
			t.Errorf("%s: %q, %v; want %q", name, got, ok, want)
		}
	}
}
