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
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// accessErrors refuses a create, or an update of the spec, by a user who
// may not create the Pipeline's children (step Deployments and Services,
// the model claim) in its namespace themselves, nor, when the update moves
// the Pipeline, in the namespace it leaves. Metadata-only updates need
// nothing, so that labels, finalizers and storage migrations go through.
func (v Validator) accessErrors(ctx context.Context, user authenticationv1.UserInfo, p, old *pipelinev1beta1.Pipeline) field.ErrorList {
	if old != nil && equality.Semantic.DeepEqual(p.Spec, old.Spec) {
		return nil
	}
	namespaces := []string{targetNamespace(p, v.Options.DefaultNamespace)}
	if old != nil {
		if from := targetNamespace(old, v.Options.DefaultNamespace); from != namespaces[0] {
			namespaces = append(namespaces, from)
		}
	}
	var actions []webhook.Action
	for _, ns := range namespaces {
		actions = append(actions,
			webhook.Action{Verb: "create", Group: "apps", Resource: "deployments", Namespace: ns},
			webhook.Action{Verb: "create", Resource: "services", Namespace: ns},
			webhook.Action{Verb: "create", Resource: "persistentvolumeclaims", Namespace: ns})
	}
	return v.Access.Refusals(ctx, user, field.NewPath("spec", "namespace"), actions...)
}

// admitDelete refuses deleting a Pipeline to a user who may not delete
// Deployments in its namespace: the garbage collector deletes the steps'
// Deployments with it.
func (v Validator) admitDelete(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if v.Access == nil {
		return webhook.Allowed()
	}
	p, err := decodePipeline(req.OldObject.Raw)
	if err != nil {
		return webhook.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Pipeline being deleted: %w", err))
	}
	errs := v.Access.Refusals(ctx, req.UserInfo, field.NewPath("spec", "namespace"),
		webhook.Action{Verb: "delete", Group: "apps", Resource: "deployments", Namespace: targetNamespace(p, v.Options.DefaultNamespace)})
	if len(errs) > 0 {
		return webhook.Denied(fmt.Sprintf("Pipeline %q cannot be deleted: %v", p.Name, errs.ToAggregate()))
	}
	return webhook.Allowed()
}
