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
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RequestVersion is the version the client wrote, which may differ from the
// version the webhook is sent: with matchPolicy Equivalent a v1 write
// reaches a v1beta1 webhook converted, RequestKind keeping v1.
func RequestVersion(req *admissionv1.AdmissionRequest) string {
	if req.RequestKind != nil {
		return req.RequestKind.Version
	}
	return req.Kind.Version
}

// ReservedAnnotationWrites refuses every key of reserved that annotations
// adds, or whose value it changes, from old (nil on create). Removing one is
// allowed, and so is sending it unchanged (kubectl get -o yaml | kubectl
// apply). owner says who alone writes them, for the message.
func ReservedAnnotationWrites(reserved []string, annotations, old map[string]string, owner string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("metadata", "annotations")
	for _, key := range slices.Sorted(slices.Values(reserved)) {
		value, ok := annotations[key]
		if previous, had := old[key]; !ok || (had && previous == value) {
			continue
		}
		errs = append(errs, field.Forbidden(path.Key(key),
			"annotation "+key+" is reserved: only "+owner+" writes it; remove it or leave it unchanged"))
	}
	return errs
}
