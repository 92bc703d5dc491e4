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

package webhook

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReservedAnnotationWrites(t *testing.T) {
	reserved := []string{"conv/b", "conv/a"}
	for name, tc := range map[string]struct {
		annotations, old map[string]string
		want             []string
	}{
		"create without":         {annotations: map[string]string{"x": "1"}},
		"create with":            {annotations: map[string]string{"conv/a": "{}"}, want: []string{"conv/a"}},
		"update adds":            {annotations: map[string]string{"conv/a": "{}"}, old: map[string]string{}, want: []string{"conv/a"}},
		"update changes":         {annotations: map[string]string{"conv/a": "{}", "conv/b": "2"}, old: map[string]string{"conv/a": "{}", "conv/b": "1"}, want: []string{"conv/b"}},
		"update keeps":           {annotations: map[string]string{"conv/a": "{}"}, old: map[string]string{"conv/a": "{}"}},
		"update removes":         {annotations: map[string]string{}, old: map[string]string{"conv/a": "{}"}},
		"both, sorted":           {annotations: map[string]string{"conv/a": "1", "conv/b": "1"}, want: []string{"conv/a", "conv/b"}},
		"other annotations free": {annotations: map[string]string{"x": "2"}, old: map[string]string{"x": "1"}},
	} {
		errs := ReservedAnnotationWrites(reserved, tc.annotations, tc.old, "the conversion")
		var got []string
		for _, e := range errs {
			got = append(got, strings.TrimSuffix(strings.TrimPrefix(e.Field, "metadata.annotations["), "]"))
			if !strings.Contains(e.Error(), "reserved") {
				t.Errorf("%s: message %q does not say reserved", name, e.Error())
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: refused %v, want %v", name, got, tc.want)
		}
	}
}

func TestRequestVersion(t *testing.T) {
	req := &admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1beta1"}}
	if got := RequestVersion(req); got != "v1beta1" {
		t.Errorf("without RequestKind: %q, want the Kind's v1beta1", got)
	}
	req.RequestKind = &metav1.GroupVersionKind{Version: "v1"}
	if got := RequestVersion(req); got != "v1" {
		t.Errorf("with RequestKind v1 (matchPolicy Equivalent): %q, want v1", got)
	}
}
