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

// Package conversion converts Pipeline objects between v1beta1 (the design
// notes' API) and v1 (cleaned up, stored). Every v1 Pipeline has exactly one
// v1beta1 form, so v1 -> v1beta1 -> v1 needs no help. v1beta1 can say more:
// where the storage type sits, extra csiParameter keys, location beside
// locations, a stray spec.status, a detailPhase or stepCount that does not
// match the rest of the status. Such a spec or status is kept whole in an
// annotation on the v1 object, and restored by the conversion back as long
// as the v1 spec or status it stands for has not changed.
package conversion

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/ndsl/controller-manager/apis/internal/stash"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

// Annotations reserved for the conversion, only ever on v1 objects: the
// v1beta1 spec and status that v1 cannot say exactly.
const (
	V1beta1SpecAnnotation   = "conversion.distri-infer.ndsl.cn/v1beta1-spec"
	V1beta1StatusAnnotation = "conversion.distri-infer.ndsl.cn/v1beta1-status"
)

// ReservedAnnotations are the conversion's annotations and what each holds.
// Only the conversion writes them; the validating webhook refuses users'.
var ReservedAnnotations = stash.Reserved{
	V1beta1SpecAnnotation:   func() any { return &pipelinev1beta1.PipelineSpec{} },
	V1beta1StatusAnnotation: func() any { return &pipelinev1beta1.PipelineStatus{} },
}

// V1beta1ToV1 converts in into out. out shares nothing with in.
func V1beta1ToV1(in *pipelinev1beta1.Pipeline, out *pipelinev1.Pipeline) error {
	in = in.DeepCopy()
	*out = pipelinev1.Pipeline{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: in.ObjectMeta,
		Spec:       specToV1(&in.Spec),
		Status:     statusToV1(&in.Status),
	}
	out.APIVersion = pipelinev1.SchemeGroupVersion.String()
	// Reserved keys: a v1beta1 object never legitimately carries them.
	stash.Drop(&out.ObjectMeta, V1beta1SpecAnnotation)
	stash.Drop(&out.ObjectMeta, V1beta1StatusAnnotation)
	if back := specToV1beta1(&out.Spec); !apiequality.Semantic.DeepEqual(&back, &in.Spec) {
		if err := stash.Put(&out.ObjectMeta, V1beta1SpecAnnotation, &in.Spec); err != nil {
			return err
		}
	}
	if back := statusToV1beta1(&out.Status); !apiequality.Semantic.DeepEqual(&back, &in.Status) {
		if err := stash.Put(&out.ObjectMeta, V1beta1StatusAnnotation, &in.Status); err != nil {
			return err
		}
	}
	return nil
}

// V1ToV1beta1 converts in into out. out shares nothing with in.
func V1ToV1beta1(in *pipelinev1.Pipeline, out *pipelinev1beta1.Pipeline) error {
	in = in.DeepCopy()
	*out = pipelinev1beta1.Pipeline{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: in.ObjectMeta,
		Spec:       specToV1beta1(&in.Spec),
		Status:     statusToV1beta1(&in.Status),
	}
	out.APIVersion = pipelinev1beta1.SchemeGroupVersion.String()
	var spec pipelinev1beta1.PipelineSpec
	ok := stash.Take(&out.ObjectMeta, V1beta1SpecAnnotation, &spec)
	// The stashed form wins only while it still says what the v1 spec says:
	// a v1 client that changed the spec gets its change.
	if v1 := specToV1(&spec); ok && apiequality.Semantic.DeepEqual(&v1, &in.Spec) {
		out.Spec = spec
	}
	var status pipelinev1beta1.PipelineStatus
	ok = stash.Take(&out.ObjectMeta, V1beta1StatusAnnotation, &status)
	if v1 := statusToV1(&status); ok && apiequality.Semantic.DeepEqual(&v1, &in.Status) {
		out.Status = status
	}
	return nil
}

func specToV1(in *pipelinev1beta1.PipelineSpec) pipelinev1.PipelineSpec {
	out := pipelinev1.PipelineSpec{
		ListenPort: in.ListenPort,
		Namespace:  in.Namespace,
		ModelStorage: pipelinev1.ModelStorage{
			Size: in.ModelStorage.Size,
		},
	}
	if in.Steps != nil {
		out.Steps = make([]pipelinev1.PipelineStep, len(in.Steps))
	}
	for i, s := range in.Steps {
		step := pipelinev1.PipelineStep{Model: s.Model, Image: s.Image, Replicas: s.Replicas, Args: s.Args}
		if s.Location != "" {
			step.NodeNames = append(step.NodeNames, s.Location)
		}
		step.NodeNames = append(step.NodeNames, s.Locations...)
		out.Steps[i] = step
	}
	ms := &in.ModelStorage
	_, hasServer := ms.CSIParameter[pipelinev1beta1.CSIParameterServer]
	_, hasShare := ms.CSIParameter[pipelinev1beta1.CSIParameterShare]
	if ms.EffectiveType() == pipelinev1beta1.StorageTypeNFS || hasServer || hasShare {
		out.ModelStorage.NFS = &pipelinev1.NFSStorage{Server: ms.NFSServer(), Path: ms.NFSShare()}
	}
	return out
}

func specToV1beta1(in *pipelinev1.PipelineSpec) pipelinev1beta1.PipelineSpec {
	out := pipelinev1beta1.PipelineSpec{
		ListenPort: in.ListenPort,
		Namespace:  in.Namespace,
		ModelStorage: pipelinev1beta1.ModelStorage{
			Size: in.ModelStorage.Size,
		},
	}
	if in.Steps != nil {
		out.Steps = make([]pipelinev1beta1.PipelineStep, len(in.Steps))
	}
	for i, s := range in.Steps {
		out.Steps[i] = pipelinev1beta1.PipelineStep{Model: s.Model, Image: s.Image, Locations: s.NodeNames, Replicas: s.Replicas, Args: s.Args}
	}
	if nfs := in.ModelStorage.NFS; nfs != nil {
		out.ModelStorage.Type = pipelinev1beta1.StorageTypeNFS
		out.ModelStorage.CSIParameter = map[string]string{
			pipelinev1beta1.CSIParameterServer: nfs.Server,
			pipelinev1beta1.CSIParameterShare:  nfs.Path,
		}
	}
	return out
}

func statusToV1(in *pipelinev1beta1.PipelineStatus) pipelinev1.PipelineStatus {
	out := pipelinev1.PipelineStatus{
		ObservedGeneration: in.ObservedGeneration,
		Models:             in.Models,
		Phase:              pipelinev1.Phase(in.Phase),
		Conditions:         in.Conditions,
	}
	if in.Steps != nil {
		out.Steps = make([]pipelinev1.StepStatus, len(in.Steps))
	}
	for i, s := range in.Steps {
		step := pipelinev1.StepStatus{Model: s.Model, DeploymentName: s.DeploymentName, ServiceName: s.ServiceName,
			Replicas: s.Replicas, ReadyReplicas: s.ReadyReplicas}
		if d := in.DetailPhase; d != nil && i < len(d.StepsPhase) && d.StepsPhase[i].Model == s.Model {
			step.DeploymentPhase = string(d.StepsPhase[i].DeploymentPhase)
		}
		out.Steps[i] = step
	}
	if s := in.Storage; s != nil {
		out.Storage = &pipelinev1.StorageStatus{PVName: s.PVName, PVPhase: s.PVPhase, PVCName: s.PVCName, PVCPhase: s.PVCPhase}
	}
	return out
}

func statusToV1beta1(in *pipelinev1.PipelineStatus) pipelinev1beta1.PipelineStatus {
	out := pipelinev1beta1.PipelineStatus{
		ObservedGeneration: in.ObservedGeneration,
		Models:             in.Models,
		Phase:              pipelinev1beta1.Phase(in.Phase),
		Conditions:         in.Conditions,
		StepCount:          int32(len(in.Steps)),
	}
	var detail pipelinev1beta1.DetailPhase
	if in.Steps != nil {
		out.Steps = make([]pipelinev1beta1.StepStatus, len(in.Steps))
	}
	for i, s := range in.Steps {
		out.Steps[i] = pipelinev1beta1.StepStatus{Model: s.Model, DeploymentName: s.DeploymentName, ServiceName: s.ServiceName,
			Replicas: s.Replicas, ReadyReplicas: s.ReadyReplicas}
		detail.StepsPhase = append(detail.StepsPhase, pipelinev1beta1.StepPhase{Model: s.Model, DeploymentPhase: pipelinev1beta1.DeploymentPhase(s.DeploymentPhase)})
	}
	if s := in.Storage; s != nil {
		out.Storage = &pipelinev1beta1.StorageStatus{PVName: s.PVName, PVPhase: s.PVPhase, PVCName: s.PVCName, PVCPhase: s.PVCPhase}
		detail.PVPhase, detail.PVCPhase = s.PVPhase, s.PVCPhase
	}
	if in.Storage != nil || len(in.Steps) > 0 {
		out.DetailPhase = &detail
	}
	return out
}
