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

package conversion

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

// BenchmarkConvertToV1 is the webhook's share of reading a converged
// two-step Pipeline through v1, as a ConversionReview carries it: in the
// notes' spelling (the type inside csiParameter and a spec.status, kept in
// annotations on the way) and in the plain one (nothing to keep).
func BenchmarkConvertToV1(b *testing.B) {
	for _, tc := range []struct {
		name   string
		mutate func(*pipelinev1beta1.Pipeline)
	}{
		{"notes", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage.CSIParameter["type"] = "nfs"
			p.Spec.Status = &runtime.RawExtension{Raw: []byte(`{"phase":"failed"}`)}
		}},
		{"plain", func(p *pipelinev1beta1.Pipeline) { p.Spec.ModelStorage.Type = pipelinev1beta1.StorageTypeNFS }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := convergedPipeline()
			tc.mutate(p)
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
			if err != nil {
				b.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: m}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := (Converter{}).Convert(ctx, obj, "distri-infer.ndsl.cn/v1"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

func convergedPipeline() *pipelinev1beta1.Pipeline {
	now := metav1.Now()
	step := func(model, node string) (pipelinev1beta1.PipelineStep, pipelinev1beta1.StepStatus, pipelinev1beta1.StepPhase) {
		return pipelinev1beta1.PipelineStep{Model: model, Image: "nginx:1.27", Location: node, Replicas: ptr.To[int32](1),
				Args: map[string]string{"listenPort": "9080"}},
			pipelinev1beta1.StepStatus{Model: model, DeploymentName: model, ServiceName: model, Replicas: 1, ReadyReplicas: 1},
			pipelinev1beta1.StepPhase{Model: model, DeploymentPhase: pipelinev1beta1.DeploymentPhaseAvailable}
	}
	s1, st1, ph1 := step("facedetection-1", "node-1")
	s2, st2, ph2 := step("facedetection-2", "node-2")
	return &pipelinev1beta1.Pipeline{
		TypeMeta:   metav1.TypeMeta{APIVersion: "distri-infer.ndsl.cn/v1beta1", Kind: "Pipeline"},
		ObjectMeta: metav1.ObjectMeta{Name: "facedetection-pipeline", UID: "5b0e1c9a-8f8e-4f5e-9a51-0c2d7b1e6f3a", Generation: 1},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps:        []pipelinev1beta1.PipelineStep{s1, s2},
			ListenPort:   9080,
			ModelStorage: pipelinev1beta1.ModelStorage{CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"}},
		},
		Status: pipelinev1beta1.PipelineStatus{
			ObservedGeneration: 1, Models: "facedetection-1,facedetection-2", Phase: pipelinev1beta1.PhaseRunning, StepCount: 2,
			DetailPhase: &pipelinev1beta1.DetailPhase{PVPhase: corev1.VolumeBound, PVCPhase: corev1.ClaimBound,
				StepsPhase: []pipelinev1beta1.StepPhase{ph1, ph2}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Ready", LastTransitionTime: now}},
			Steps:      []pipelinev1beta1.StepStatus{st1, st2},
			Storage: &pipelinev1beta1.StorageStatus{PVName: "pv", PVCName: "pvc",
				PVPhase: corev1.VolumeBound, PVCPhase: corev1.ClaimBound},
		},
	}
}
