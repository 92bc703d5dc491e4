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
	"slices"
	"testing"
)

func TestParsePprofTop(t *testing.T) {
	out := `File: scale
Type: cpu
Time: 2026-11-26 00:47:17 UTC
Duration: 4.55s, Total samples = 1.20s (26.37%)
Showing nodes accounting for 0.50s, 41.67% of 1.20s total
Dropped 120 nodes (cum <= 0.01s)
Showing top 2 nodes out of 300
      flat  flat%   sum%        cum   cum%
     0.30s 25.00% 25.00%      0.40s 33.33%  runtime.mallocgc
     0.20s 16.67% 41.67%      0.20s 16.67%  encoding/json.(*decodeState).object
`
	summary, top := parsePprofTop(out)
	if summary != "Showing nodes accounting for 0.50s, 41.67% of 1.20s total" {
		t.Errorf("summary = %q", summary)
	}
	want := []string{"runtime.mallocgc 25.00% (cum 33.33%)", "encoding/json.(*decodeState).object 16.67% (cum 16.67%)"}
	if !slices.Equal(top, want) {
		t.Errorf("top = %q, want %q", top, want)
	}
}
