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
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Allowed admits the request unchanged, with warnings for the user.
func Allowed(warnings ...string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// Denied rejects the request with 403 Forbidden and message.
func Denied(message string, warnings ...string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed:  false,
		Warnings: warnings,
		Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusForbidden,
			Reason: metav1.StatusReasonForbidden, Message: message,
		},
	}
}

// Invalid rejects the request with 422 Invalid and the field errors, the
// same status the API server's own validation answers; kubectl prints each
// field error.
func Invalid(gk schema.GroupKind, name string, errs field.ErrorList, warnings ...string) *admissionv1.AdmissionResponse {
	status := apierrors.NewInvalid(gk, name, errs).ErrStatus
	return &admissionv1.AdmissionResponse{Allowed: false, Warnings: warnings, Result: &status}
}

// Errored rejects the request because the webhook could not decide, with
// code (for example 400 for an object it cannot decode, 500 for a bug).
func Errored(code int32, err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Message: err.Error()},
	}
}

// JSONPatchOp is one RFC 6902 operation.
type JSONPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Patched admits the request with the JSON patch ops applied; no ops admits
// it unchanged. A value that cannot be encoded is a bug: it yields a 500
// denial rather than a silently different object.
func Patched(ops []JSONPatchOp, warnings ...string) *admissionv1.AdmissionResponse {
	if len(ops) == 0 {
		return Allowed(warnings...)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return Errored(http.StatusInternalServerError, fmt.Errorf("encoding the patch: %w", err))
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt, Warnings: warnings}
}
