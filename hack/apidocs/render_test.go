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
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestTypeOf(t *testing.T) {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	for _, tc := range []struct {
		name   string
		schema apiextensionsv1.JSONSchemaProps
		want   string
	}{
		{"int32", apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}, "int32"},
		{"date-time", apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}, "string (date-time)"},
		{"int-or-string", apiextensionsv1.JSONSchemaProps{XIntOrString: true}, "int or string"},
		{"list", apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}}, "[]string"},
		{"map", apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}}, "map[string]string"},
		{"untyped", apiextensionsv1.JSONSchemaProps{}, "any"},
	} {
		if got := typeOf(tc.schema); got != tc.want {
			t.Errorf("%s: typeOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDescribeFitsOneTableCell(t *testing.T) {
	s := apiextensionsv1.JSONSchemaProps{
		Description: "First line\nwraps <here>.\n\nSecond paragraph with a | pipe.",
		Enum:        []apiextensionsv1.JSON{{Raw: []byte(`"A"`)}, {Raw: []byte(`"B"`)}},
		MaxLength:   ptr.To[int64](63),
		XValidations: apiextensionsv1.ValidationRules{
			{Rule: "self.a || self.b", Message: "a or b"},
		},
	}
	got := describe(s, true)
	want := "First line wraps &lt;here&gt;.<br>Second paragraph with a \\| pipe. " +
		"<br>*required; one of `\"A\"`, `\"B\"`; max length 63.* " +
		"<br>Rule `self.a \\|\\| self.b`: a or b"
	if got != want {
		t.Errorf("describe =\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(got, "\n") {
		t.Errorf("describe has a newline, which ends the table row: %q", got)
	}
}

func TestAnchorIsGitHubs(t *testing.T) {
	crd := apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "distri-infer.ndsl.cn",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Pipeline"},
	}}
	v := apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1beta1"}
	if got, want := anchor(crd, v), "pipeline-distri-inferndslcnv1beta1"; got != want {
		t.Errorf("anchor = %q, want %q", got, want)
	}
}
