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

import "testing"

// helm lint --strict passes with the defaults and with every optional part.
func TestChartLints(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":                     nil,
		"everything":                   everything("self"),
		"everything with cert-manager": everything("cert-manager"),
		"no webhooks":                  {"webhooks": map[string]any{"enabled": false}, "crds": map[string]any{"keep": false}},
	} {
		if out, err := helm(t, "lint", "--strict", chartDir(t), "--namespace", "platform", "-f", valuesFile(t, values)); err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}
