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

package chart

import (
	"slices"
	"strings"
	"testing"
)

// notes is NOTES.txt as helm install prints it (client-side dry run).
func notes(t *testing.T, values map[string]any) string {
	t.Helper()
	out, err := helm(t, "install", release, chartDir(t), "--dry-run=client", "--namespace", "ndsl-system", "-f", valuesFile(t, values))
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(out, "NOTES:\n")
	if !ok {
		t.Fatalf("helm install printed no NOTES:\n%s", out)
	}
	return text
}

// Issue 37: NOTES.txt warns while a Pipeline allowlist is open (and the
// Pipeline controller runs), once per list.
func TestChartNotesWarnOfOpenAllowlists(t *testing.T) {
	const nfs, images = "WARNING: pipeline.allowedNFS is empty", "WARNING: pipeline.allowedImages is empty"
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"defaults", nil, []string{nfs, images}},
		{"NFS set", map[string]any{"pipeline": map[string]any{"allowedNFS": []any{"nfs.example.com"}}}, []string{images}},
		{"images set", map[string]any{"pipeline": map[string]any{"allowedImages": []any{"registry.example.com/"}}}, []string{nfs}},
		{"both set", map[string]any{"pipeline": map[string]any{"allowedNFS": []any{"nfs.example.com"}, "allowedImages": []any{"registry.example.com/"}}}, nil},
		{"pipeline named", map[string]any{"controllers": []any{"app", "pipeline"}}, []string{nfs, images}},
		{"no pipeline controller", map[string]any{"controllers": []any{"*", "-pipeline"}}, nil},
		{"app only", map[string]any{"controllers": []any{"app"}}, nil},
	} {
		text := notes(t, tc.values)
		for _, w := range []string{nfs, images} {
			want := 0
			if slices.Contains(tc.want, w) {
				want = 1
			}
			if got := strings.Count(text, w); got != want {
				t.Errorf("%s: NOTES say %q %d times, want %d:\n%s", tc.name, w, got, want, text)
			}
		}
	}
}
