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

package pipeline

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// OverlapValidator is the Pipeline webhook beside the admission policies
// (manifests/policies), which make every check of Validator but one: a
// storage directory that overlaps another stored Pipeline's, which a policy
// cannot see, as it cannot list objects. Only that is checked here; the
// requester's rights and the allowlists are the policy's and are not asked
// again (each right would be one more SubjectAccessReview per write).
type OverlapValidator struct {
	// ListPipelines lists the stored Pipelines, as Validator's.
	ListPipelines func(ctx context.Context) ([]pipelinev1beta1.Pipeline, error)
}

// Admit refuses a create, or an update that changes the storage directory,
// whose directory is, contains or lies inside another stored Pipeline's.
func (v OverlapValidator) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return webhook.Allowed()
	}
	p, old, failed := decodeWrite(req)
	if failed != nil {
		return failed
	}
	errs, warnings := overlapErrors(ctx, v.ListPipelines, p, old)
	if len(errs) > 0 {
		return webhook.Invalid(pipelinev1beta1.Kind("Pipeline"), p.Name, errs, warnings...)
	}
	return webhook.Allowed(warnings...)
}
