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
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"
)

const testGroup = "ingress.example.com"

func app(version, name string, spec map[string]any) []byte {
	obj := map[string]any{
		"apiVersion": testGroup + "/" + version, "kind": "App",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     spec,
	}
	data, _ := json.Marshal(obj)
	return data
}

func conversionBody(t *testing.T, to string, objects ...[]byte) []byte {
	t.Helper()
	review := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "conv-1", DesiredAPIVersion: to},
	}
	for _, o := range objects {
		review.Request.Objects = append(review.Request.Objects, runtime.RawExtension{Raw: o})
	}
	data, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// renameReplicas is a toy conversion: v1beta1 spec.replicas <-> v1 spec.size.
func renameReplicas(_ context.Context, obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	out.SetAPIVersion(to)
	from, into := "replicas", "size"
	if to == testGroup+"/v1beta1" {
		from, into = into, from
	}
	v, found, _ := unstructured.NestedFieldCopy(obj.Object, "spec", from)
	if !found {
		return nil, errors.New("spec." + from + " missing")
	}
	unstructured.RemoveNestedField(out.Object, "spec", from)
	if err := unstructured.SetNestedField(out.Object, v, "spec", into); err != nil {
		return nil, err
	}
	return out, nil
}

func decodeConversionResponse(t *testing.T, code int, body []byte) *apiextensionsv1.ConversionResponse {
	t.Helper()
	if code != http.StatusOK {
		t.Fatalf("status %d, body %q", code, body)
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		t.Fatal(err)
	}
	if review.APIVersion != "apiextensions.k8s.io/v1" || review.Kind != "ConversionReview" || review.Response == nil {
		t.Fatalf("bad review %+v", review)
	}
	if review.Response.UID != "conv-1" {
		t.Errorf("response UID %q, want conv-1", review.Response.UID)
	}
	return review.Response
}

func TestConversion(t *testing.T) {
	s := NewServer()
	calls := 0
	s.HandleConversion("/convert/apps", "test-convert", ConverterFunc(func(ctx context.Context, obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
		calls++
		return renameReplicas(ctx, obj, to)
	}))
	to := testGroup + "/v1"
	rec := post(t, s, "/convert/apps", "application/json", conversionBody(t, to,
		app("v1beta1", "a", map[string]any{"replicas": 2}),
		app("v1", "b", map[string]any{"size": 3}), // already in v1: passed through
	))
	resp := decodeConversionResponse(t, rec.Code, rec.Body.Bytes())
	if resp.Result.Status != metav1.StatusSuccess {
		t.Fatalf("result %+v", resp.Result)
	}
	if len(resp.ConvertedObjects) != 2 {
		t.Fatalf("%d objects converted, want 2", len(resp.ConvertedObjects))
	}
	if calls != 1 {
		t.Errorf("converter called %d times, want 1 (the v1 object needs no conversion)", calls)
	}
	for i, want := range []int64{2, 3} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(resp.ConvertedObjects[i].Raw); err != nil {
			t.Fatal(err)
		}
		size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
		if u.GetAPIVersion() != to || size != want {
			t.Errorf("object %d: %s size %d, want %s size %d", i, u.GetAPIVersion(), size, to, want)
		}
	}
}

func TestConversionFailures(t *testing.T) {
	to := testGroup + "/v1"
	tests := []struct {
		name      string
		converter ConverterFunc
		wantInMsg string
	}{
		{
			name: "converter error names the object",
			converter: func(context.Context, *unstructured.Unstructured, string) (*unstructured.Unstructured, error) {
				return nil, errors.New("field x has no place in v1")
			},
			wantInMsg: "converting App ingress.example.com/v1beta1 default/bad to ingress.example.com/v1: field x has no place in v1",
		},
		{
			name: "wrong apiVersion returned",
			converter: func(_ context.Context, obj *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
				return obj, nil
			},
			wantInMsg: `converter returned apiVersion "ingress.example.com/v1beta1"`,
		},
		{
			name: "nil returned",
			converter: func(context.Context, *unstructured.Unstructured, string) (*unstructured.Unstructured, error) {
				return nil, nil
			},
			wantInMsg: "converter returned nothing",
		},
		{
			name: "panic",
			converter: func(context.Context, *unstructured.Unstructured, string) (*unstructured.Unstructured, error) {
				panic("boom")
			},
			wantInMsg: "internal error in webhook",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "test-conversion-" + strings.ReplaceAll(tt.name, " ", "-")
			s := NewServer()
			s.HandleConversion("/c", name, tt.converter)
			errorsBefore, _ := testutil.GetCounterMetricValue(conversionErrorsTotal.WithLabelValues(name))
			allErrorsBefore, _ := testutil.GetCounterMetricValue(errorsTotal.WithLabelValues(name))
			rec := post(t, s, "/c", "application/json", conversionBody(t, to, app("v1beta1", "bad", map[string]any{"replicas": 1})))
			resp := decodeConversionResponse(t, rec.Code, rec.Body.Bytes())
			if resp.Result.Status != metav1.StatusFailure {
				t.Fatalf("status %q, want Failure", resp.Result.Status)
			}
			if !strings.Contains(resp.Result.Message, tt.wantInMsg) {
				t.Errorf("message %q does not contain %q", resp.Result.Message, tt.wantInMsg)
			}
			if len(resp.ConvertedObjects) != 0 {
				t.Errorf("a failed review returned %d objects", len(resp.ConvertedObjects))
			}
			if n, _ := testutil.GetCounterMetricValue(conversionErrorsTotal.WithLabelValues(name)); n-errorsBefore != 1 {
				t.Errorf("conversion_errors_total grew by %v, want 1", n-errorsBefore)
			}
			if n, _ := testutil.GetCounterMetricValue(errorsTotal.WithLabelValues(name)); n-allErrorsBefore != 1 {
				t.Errorf("errors_total grew by %v, want 1", n-allErrorsBefore)
			}
		})
	}
}

func TestConversionMalformed(t *testing.T) {
	s := NewServer()
	s.HandleConversion("/c", "test-conversion-malformed", ConverterFunc(renameReplicas))
	for name, body := range map[string]string{
		"v1beta1 review":     `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"x","desiredAPIVersion":"a/v1"}}`,
		"no desired version": `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x"}}`,
		"no request":         `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`,
		"not JSON":           `[`,
	} {
		if rec := post(t, s, "/c", "application/json", []byte(body)); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, rec.Code)
		}
	}
	// An object that is not JSON fails the review, it is not a 400: the
	// review itself was well formed.
	rec := post(t, s, "/c", "application/json", conversionBody(t, testGroup+"/v1", []byte(`{"kind":1}`)))
	if resp := decodeConversionResponse(t, rec.Code, rec.Body.Bytes()); resp.Result.Status != metav1.StatusFailure {
		t.Errorf("undecodable object: status %q, want Failure", resp.Result.Status)
	}
}
