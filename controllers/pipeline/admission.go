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
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// Validator is the Pipeline validating webhook. The CRD's CEL rules say the
// same about the storage, so that it holds with the webhook off; the webhook
// adds field paths, clearer messages and the warnings. It also refuses what
// the manager's allowlists forbid, which the controller refuses too.
type Validator struct {
	// Options are the controller's, validated: the webhook refuses what the
	// controller would. An empty DefaultNamespace checks no namespace, as
	// empty allowlists allow all.
	Options Options
	// ListPipelines lists the stored Pipelines, so that a Pipeline whose
	// storage directory overlaps another's is refused; nil skips the check,
	// which the controller enforces anyway.
	ListPipelines func(ctx context.Context) ([]pipelinev1beta1.Pipeline, error)
	// Access checks that the requester may write the Pipeline's children
	// themselves (access.go); nil checks nothing.
	Access *webhook.AccessReviewer
}

// validatePipeline returns what is wrong with p's model storage, and the
// warnings for what is tolerated but ignored.
func validatePipeline(p *pipelinev1beta1.Pipeline) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	specPath := field.NewPath("spec")
	if p.Spec.Status != nil {
		warnings = append(warnings, fmt.Sprintf("%s is not part of the Pipeline spec and is ignored (it is %s); the Pipeline's status is .status, which the controller writes",
			specPath.Child("status"), p.Spec.Status.Raw))
	}

	ms := &p.Spec.ModelStorage
	msPath := specPath.Child("modelStorage")
	csiPath := msPath.Child("csiParameter")
	inside, hasInside := ms.CSIParameter[pipelinev1beta1.CSIParameterType]
	switch {
	case ms.Type == "" && !hasInside:
		errs = append(errs, field.Required(msPath.Child("type"), "the storage type, nfs, goes in modelStorage.type or in modelStorage.csiParameter.type"))
	case hasInside && ms.Type != "" && inside != string(ms.Type):
		errs = append(errs, field.Invalid(csiPath.Key(pipelinev1beta1.CSIParameterType), inside,
			fmt.Sprintf("disagrees with modelStorage.type %q; give the type once", ms.Type)))
	case ms.EffectiveType() != pipelinev1beta1.StorageTypeNFS:
		path := msPath.Child("type")
		if ms.Type == "" {
			path = csiPath.Key(pipelinev1beta1.CSIParameterType)
		}
		errs = append(errs, field.NotSupported(path, ms.EffectiveType(), []string{string(pipelinev1beta1.StorageTypeNFS)}))
	}
	if ms.NFSServer() == "" {
		errs = append(errs, field.Required(csiPath.Key(pipelinev1beta1.CSIParameterServer), "modelStorage of type nfs requires the NFS server's host name or IP address"))
	}
	if ms.NFSShare() == "" {
		errs = append(errs, field.Required(csiPath.Key(pipelinev1beta1.CSIParameterShare), "modelStorage of type nfs requires the exported path on the NFS server"))
	}
	var ignored []string
	for key := range ms.CSIParameter {
		switch key {
		case pipelinev1beta1.CSIParameterType, pipelinev1beta1.CSIParameterServer, pipelinev1beta1.CSIParameterShare:
		default:
			ignored = append(ignored, key)
		}
	}
	sort.Strings(ignored)
	for _, key := range ignored {
		warnings = append(warnings, fmt.Sprintf("%s is not used by nfs storage and is ignored (the controller uses server and share)", csiPath.Key(key)))
	}
	return errs, warnings
}

// allowlistErrors refuses an NFS export or a step image the allowlists
// forbid. An update that keeps the stored export, or an image some stored
// step already had, is not refused for it, so that a Pipeline stored before
// the list was set can still be labelled or have its finalizers removed; the
// controller refuses it all the same.
func (v Validator) allowlistErrors(p, old *pipelinev1beta1.Pipeline) field.ErrorList {
	var errs field.ErrorList
	ms, csiPath := &p.Spec.ModelStorage, field.NewPath("spec", "modelStorage", "csiParameter")
	server, share := ms.NFSServer(), ms.NFSShare()
	keptExport := old != nil && old.Spec.ModelStorage.NFSServer() == server && old.Spec.ModelStorage.NFSShare() == share
	if err := nfsRefusal(v.Options.AllowedNFS, server, share); err != nil && !keptExport && server != "" && share != "" {
		path := csiPath.Key(pipelinev1beta1.CSIParameterShare)
		if !serverListed(v.Options.AllowedNFS, server) {
			path = csiPath.Key(pipelinev1beta1.CSIParameterServer)
		}
		errs = append(errs, field.Forbidden(path, err.Error()))
	}
	for i, step := range p.Spec.Steps {
		err := imageRefusal(v.Options.AllowedImages, step.Image)
		if err == nil || (old != nil && slices.ContainsFunc(old.Spec.Steps, func(s pipelinev1beta1.PipelineStep) bool { return s.Image == step.Image })) {
			continue
		}
		errs = append(errs, field.Forbidden(field.NewPath("spec", "steps").Index(i).Child("image"), err.Error()))
	}
	return append(errs, v.boundErrors(p, old)...)
}

// boundErrors refuses a target namespace the controller may not write to
// and a step with more replicas than the bound. An update that keeps the
// stored namespace, or a step's stored replicas, is not refused for it, as
// in allowlistErrors.
func (v Validator) boundErrors(p, old *pipelinev1beta1.Pipeline) field.ErrorList {
	var errs field.ErrorList
	o := &v.Options
	namespace := targetNamespace(p, o.DefaultNamespace)
	keptNamespace := old != nil && targetNamespace(old, o.DefaultNamespace) == namespace
	if err := o.namespaceRefusal(namespace); err != nil && !keptNamespace && o.DefaultNamespace != "" {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "namespace"), err.Error()))
	}
	for i, step := range p.Spec.Steps {
		err := replicasRefusal(o.MaxReplicas, step)
		if err == nil || (old != nil && slices.ContainsFunc(old.Spec.Steps, func(s pipelinev1beta1.PipelineStep) bool {
			return s.Model == step.Model && s.Replicas != nil && *s.Replicas >= *step.Replicas
		})) {
			continue
		}
		errs = append(errs, field.Forbidden(field.NewPath("spec", "steps").Index(i).Child("replicas"), err.Error()))
	}
	return errs
}

// overlapErrors refuses a created Pipeline, or one whose storage directory
// changes, when its directory is, contains or lies inside another stored
// Pipeline's: moving into another team's directory is what an author must
// not do, whichever Pipeline is older. A failed list only warns: the
// controller refuses the overlap too.
// list is the webhook's ListPipelines; nil skips the check.
func overlapErrors(ctx context.Context, list func(context.Context) ([]pipelinev1beta1.Pipeline, error), p, old *pipelinev1beta1.Pipeline) (field.ErrorList, []string) {
	dir := storageDir(p)
	if list == nil || dir == "" || (old != nil && storageDir(old) == dir) {
		return nil, nil
	}
	stored, err := list(ctx)
	if err != nil {
		return nil, []string{fmt.Sprintf("could not compare the storage directory with other Pipelines' (%v); the controller will", err)}
	}
	var errs field.ErrorList
	for i := range stored {
		q := &stored[i]
		if q.Name != p.Name && dirsOverlap(dir, storageDir(q)) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "modelStorage", "csiParameter").Key(pipelinev1beta1.CSIParameterShare),
				fmt.Sprintf("the Pipeline's directory %s on the NFS export overlaps Pipeline %s's directory %s; choose another share or name", dir, q.Name, storageDir(q))))
		}
	}
	return errs, nil
}

// decodePipeline reads a Pipeline of either version from an admission
// request, as v1beta1.
func decodePipeline(raw []byte) (*pipelinev1beta1.Pipeline, error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, err
	}
	switch meta.APIVersion {
	case pipelinev1beta1.SchemeGroupVersion.String():
		p := &pipelinev1beta1.Pipeline{}
		return p, json.Unmarshal(raw, p)
	case pipelinev1.SchemeGroupVersion.String():
		in := &pipelinev1.Pipeline{}
		if err := json.Unmarshal(raw, in); err != nil {
			return nil, err
		}
		p := &pipelinev1beta1.Pipeline{}
		return p, conversion.V1ToV1beta1(in, p)
	}
	return nil, fmt.Errorf("not a Pipeline: apiVersion %q, kind %q", meta.APIVersion, meta.Kind)
}

// decodeWrite reads a create's or an update's Pipeline, and an update's
// old one, as v1beta1; a response when they do not decode.
func decodeWrite(req *admissionv1.AdmissionRequest) (p, old *pipelinev1beta1.Pipeline, failed *admissionv1.AdmissionResponse) {
	p, err := decodePipeline(req.Object.Raw)
	if err != nil {
		return nil, nil, webhook.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Pipeline: %w", err))
	}
	if req.Operation == admissionv1.Update {
		if old, err = decodePipeline(req.OldObject.Raw); err != nil {
			return nil, nil, webhook.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old Pipeline: %w", err))
		}
	}
	return p, old, nil
}

// Admit rejects a Pipeline whose storage cannot work, whose NFS export or
// images the allowlists forbid, whose children the requester may not write
// themselves, or a v1beta1 write of the conversion's annotations, with
// every reason, and warns about what it ignores. A delete needs the right
// to delete the steps' Deployments.
func (v Validator) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation == admissionv1.Delete {
		return v.admitDelete(ctx, req)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return webhook.Allowed()
	}
	p, old, failed := decodeWrite(req)
	if failed != nil {
		return failed
	}
	errs, warnings := validatePipeline(p)
	errs = append(errs, v.allowlistErrors(p, old)...)
	errs = append(errs, v.accessErrors(ctx, req.UserInfo, p, old)...)
	overlaps, overlapWarnings := overlapErrors(ctx, v.ListPipelines, p, old)
	errs, warnings = append(errs, overlaps...), append(warnings, overlapWarnings...)
	if webhook.RequestVersion(req) == pipelinev1beta1.SchemeGroupVersion.Version {
		// Through v1 the conversion wrote them; through v1beta1 a user did.
		var oldAnnotations map[string]string
		if old != nil {
			oldAnnotations = old.Annotations
		}
		errs = append(errs, webhook.ReservedAnnotationWrites(conversion.ReservedAnnotations.Keys(), p.Annotations, oldAnnotations,
			"the conversion between v1beta1 and v1")...)
	}
	if len(errs) > 0 {
		return webhook.Invalid(pipelinev1beta1.Kind("Pipeline"), p.Name, errs, warnings...)
	}
	return webhook.Allowed(warnings...)
}
