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
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

var admissionReviewGVK = admissionv1.SchemeGroupVersion.WithKind("AdmissionReview")

// admissionEndpoint serves one admission webhook.
type admissionEndpoint struct {
	name    string
	handler AdmissionHandler
}

func (e *admissionEndpoint) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	code := http.StatusOK
	defer func() { observe(e.name, code, start) }()

	body, code, err := readReview(w, req)
	if err != nil {
		code = writeError(w, req, e.name, code, err)
		return
	}
	review, err := decodeAdmissionReview(body)
	if err != nil {
		code = writeError(w, req, e.name, http.StatusBadRequest, err)
		return
	}

	r := review.Request
	logger := klog.FromContext(req.Context()).WithValues("webhook", e.name, "uid", r.UID,
		"kind", r.Kind.Kind, "namespace", r.Namespace, "name", r.Name, "operation", r.Operation)
	ctx := klog.NewContext(req.Context(), logger)

	resp := e.admit(ctx, r)
	if !resp.Allowed {
		rejectionsTotal.WithLabelValues(e.name).Inc()
		if resp.Result.Code >= http.StatusInternalServerError {
			errorsTotal.WithLabelValues(e.name).Inc()
		}
		logger.V(2).Info("Admission denied", "code", resp.Result.Code, "message", resp.Result.Message)
	} else {
		logger.V(4).Info("Admission allowed", "patched", len(resp.Patch) > 0, "warnings", len(resp.Warnings))
	}
	code = writeJSON(w, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionReviewGVK.GroupVersion().String(), Kind: admissionReviewGVK.Kind},
		Response: resp,
	})
}

// admit calls the handler, turning a panic or a nil response into a denial,
// and fills in what the API server requires of every response.
func (e *admissionEndpoint) admit(ctx context.Context, r *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse) {
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Admission handler panicked")
			resp = Errored(http.StatusInternalServerError, fmt.Errorf("internal error in webhook %s", e.name))
		}
		resp.UID = r.UID
		normalize(resp)
	}()
	resp = e.handler.Admit(ctx, r)
	if resp == nil {
		resp = Errored(http.StatusInternalServerError, fmt.Errorf("internal error in webhook %s: no response", e.name))
	}
	return resp
}

// normalize makes a response complete: a denial carries a failure status
// with a code, a patch carries its type.
func normalize(resp *admissionv1.AdmissionResponse) {
	if !resp.Allowed {
		if resp.Result == nil {
			resp.Result = &metav1.Status{}
		}
		resp.Result.Status = metav1.StatusFailure
		if resp.Result.Code == 0 {
			resp.Result.Code = http.StatusForbidden
		}
		if resp.Result.Reason == "" && resp.Result.Code == http.StatusForbidden {
			resp.Result.Reason = metav1.StatusReasonForbidden
		}
		resp.Patch, resp.PatchType = nil, nil
		return
	}
	if len(resp.Patch) > 0 && resp.PatchType == nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	if len(resp.Patch) == 0 {
		resp.PatchType = nil
	}
}

func decodeAdmissionReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionReviewGVK {
		return nil, fmt.Errorf("expected %s, got apiVersion %q kind %q", admissionReviewGVK, review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, errors.New("AdmissionReview request has no uid")
	}
	return &review, nil
}
