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
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/metrics/testutil"
)

func admissionBody(t *testing.T, uid types.UID) []byte {
	t.Helper()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uid,
			Kind:      metav1.GroupVersionKind{Group: "ingress.example.com", Version: "v1beta1", Kind: "App"},
			Namespace: "default", Name: "web", Operation: admissionv1.Create,
		},
	}
	data, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func post(t *testing.T, h http.Handler, path, contentType string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeAdmissionResponse(t *testing.T, rec *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %q", rec.Code, rec.Body.String())
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
		t.Fatalf("decoding the response: %v", err)
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		t.Fatalf("response apiVersion %q kind %q", review.APIVersion, review.Kind)
	}
	if review.Response == nil {
		t.Fatal("no response in the review")
	}
	return review.Response
}

func TestAdmissionResponses(t *testing.T) {
	gk := schema.GroupKind{Group: "ingress.example.com", Kind: "App"}
	tests := []struct {
		name        string
		handler     AdmissionFunc
		wantAllowed bool
		wantCode    int32
		wantPatch   bool
		wantInMsg   string
	}{
		{
			name: "allowed with warnings",
			handler: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return Allowed("careful")
			},
			wantAllowed: true,
		},
		{
			name: "patch gets its type",
			handler: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(`[{"op":"add","path":"/spec/x","value":false}]`)}
			},
			wantAllowed: true, wantPatch: true,
		},
		{
			name: "Patched helper keeps a false value",
			handler: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return Patched([]JSONPatchOp{{Op: "add", Path: "/spec/x", Value: false}})
			},
			wantAllowed: true, wantPatch: true,
		},
		{
			name: "bare denial becomes 403",
			handler: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return &admissionv1.AdmissionResponse{Allowed: false}
			},
			wantCode: http.StatusForbidden,
		},
		{
			name: "invalid is 422 with the field",
			handler: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return Invalid(gk, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "enable_ingress"), true, "requires enable_service")})
			},
			wantCode: http.StatusUnprocessableEntity, wantInMsg: "spec.enable_ingress",
		},
		{
			name: "a denial carries no patch",
			handler: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				return &admissionv1.AdmissionResponse{Allowed: false, Patch: []byte(`[]`), Result: &metav1.Status{Message: "no"}}
			},
			wantCode: http.StatusForbidden, wantInMsg: "no",
		},
		{
			name:     "nil response is an internal error",
			handler:  func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil },
			wantCode: http.StatusInternalServerError, wantInMsg: "internal error in webhook",
		},
		{
			name:     "panic is an internal error",
			handler:  func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { panic("boom") },
			wantCode: http.StatusInternalServerError, wantInMsg: "internal error in webhook",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "test-admission-" + strings.ReplaceAll(tt.name, " ", "-")
			s := NewServer()
			s.HandleAdmission("/x", name, tt.handler)
			uid := types.UID("uid-" + string(rune('a'+i)))
			// Deltas: the counters are global, and go test -count=N reruns.
			rejectionsBefore, _ := testutil.GetCounterMetricValue(rejectionsTotal.WithLabelValues(name))
			okBefore, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(name, "200"))
			errorsBefore, _ := testutil.GetCounterMetricValue(errorsTotal.WithLabelValues(name))

			resp := decodeAdmissionResponse(t, post(t, s, "/x", "application/json", admissionBody(t, uid)))

			if resp.UID != uid {
				t.Errorf("response UID %q, want the request's %q", resp.UID, uid)
			}
			if resp.Allowed != tt.wantAllowed {
				t.Errorf("allowed %v, want %v", resp.Allowed, tt.wantAllowed)
			}
			if tt.wantPatch != (len(resp.Patch) > 0) {
				t.Errorf("patch %q, want one: %v", resp.Patch, tt.wantPatch)
			}
			if tt.wantPatch && (resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch) {
				t.Errorf("patch type %v, want JSONPatch", resp.PatchType)
			}
			if tt.wantPatch && !bytes.Contains(resp.Patch, []byte(`"value":false`)) {
				t.Errorf("patch %s lost its value", resp.Patch)
			}
			if !tt.wantAllowed {
				if resp.Result == nil || resp.Result.Code != tt.wantCode || resp.Result.Status != metav1.StatusFailure {
					t.Fatalf("result %+v, want a failure with code %d", resp.Result, tt.wantCode)
				}
				if !strings.Contains(resp.Result.Message, tt.wantInMsg) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, tt.wantInMsg)
				}
				if resp.PatchType != nil || len(resp.Patch) > 0 {
					t.Errorf("a denial carries a patch: %s", resp.Patch)
				}
			}
			rejections, _ := testutil.GetCounterMetricValue(rejectionsTotal.WithLabelValues(name))
			if want := map[bool]float64{true: 0, false: 1}[tt.wantAllowed]; rejections-rejectionsBefore != want {
				t.Errorf("rejections counted %v, want %v", rejections-rejectionsBefore, want)
			}
			if n, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(name, "200")); n-okBefore != 1 {
				t.Errorf("requests_total{code=200} grew by %v, want 1", n-okBefore)
			}
			// Only the webhook's own failures are errors (what the alert
			// on webhook errors counts), not the denials it decides.
			wantErrors := map[bool]float64{true: 1, false: 0}[tt.wantCode >= http.StatusInternalServerError]
			if n, _ := testutil.GetCounterMetricValue(errorsTotal.WithLabelValues(name)); n-errorsBefore != wantErrors {
				t.Errorf("errors_total grew by %v, want %v", n-errorsBefore, wantErrors)
			}
		})
	}
}

func TestAdmissionHandlerSeesRequestAndLogger(t *testing.T) {
	s := NewServer()
	var got *admissionv1.AdmissionRequest
	s.HandleAdmission("/mutate/apps", "test-sees-request", AdmissionFunc(func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		got = req
		return Allowed()
	}))
	decodeAdmissionResponse(t, post(t, s, "/mutate/apps", "application/json; charset=utf-8", admissionBody(t, "u1")))
	if got == nil || got.Name != "web" || got.Namespace != "default" || got.Kind.Kind != "App" || got.Operation != admissionv1.Create {
		t.Fatalf("handler saw %+v", got)
	}
}

func TestAdmissionMalformedRequests(t *testing.T) {
	s := NewServer()
	called := false
	s.HandleAdmission("/validate/apps", "test-malformed", AdmissionFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		called = true
		return Allowed()
	}))
	good := admissionBody(t, "u1")
	badBefore, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues("test-malformed", "400"))
	tests := []struct {
		name        string
		method      string
		contentType string
		body        string
		want        int
	}{
		{"GET", http.MethodGet, "application/json", string(good), http.StatusMethodNotAllowed},
		{"wrong content type", http.MethodPost, "text/plain", string(good), http.StatusUnsupportedMediaType},
		{"empty body", http.MethodPost, "application/json", "", http.StatusBadRequest},
		{"not JSON", http.MethodPost, "application/json", "{", http.StatusBadRequest},
		{"v1beta1 review", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`, http.StatusBadRequest},
		{"wrong kind", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x"}}`, http.StatusBadRequest},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
		{"no uid", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/validate/apps", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.contentType)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d (body %q)", rec.Code, tt.want, rec.Body.String())
			}
		})
	}
	if called {
		t.Error("the handler was called for a malformed request")
	}
	if n, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues("test-malformed", "400")); n-badBefore != 6 {
		t.Errorf("requests_total{code=400} grew by %v, want 6", n-badBefore)
	}
	rec := post(t, s, "/unknown", "application/json", good)
	if rec.Code != http.StatusNotFound {
		t.Errorf("unregistered path: status %d, want 404", rec.Code)
	}
}

func TestRegisteringAPathTwicePanics(t *testing.T) {
	s := NewServer()
	s.HandleAdmission("/a", "one", AdmissionFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return Allowed() }))
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	s.HandleConversion("/a", "two", nil)
}
