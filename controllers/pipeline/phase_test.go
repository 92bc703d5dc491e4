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
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

func TestPhaseOf(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status}
	}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  pipelinev1.Phase
	}{
		{"no conditions yet", nil, pipelinev1.PhasePending},
		{"ready", []metav1.Condition{cond("Ready", "True"), cond("Degraded", "False")}, pipelinev1.PhaseRunning},
		{"not ready", []metav1.Condition{cond("Ready", "False"), cond("Degraded", "False")}, pipelinev1.PhasePending},
		{"degraded", []metav1.Condition{cond("Ready", "False"), cond("Degraded", "True")}, pipelinev1.PhaseFailed},
	} {
		if got := phaseOf(tc.conds); got != tc.want {
			t.Errorf("%s: phase %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDeploymentPhase(t *testing.T) {
	deployment := func(replicas, ready int32, deleting bool) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 1},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas,
				ReadyReplicas: ready},
		}
		if deleting {
			d.DeletionTimestamp = &metav1.Time{}
		}
		return d
	}
	obs := observed{steps: []observedStep{
		{model: "a", deployment: deployment(2, 2, false)},
		{model: "b", deployment: deployment(2, 1, false)},
		{model: "c"},
		{model: "d", deployment: deployment(1, 1, true)},
	}}
	want := []string{"Available", "Progressing", "Missing", "Terminating"}
	for i, w := range want {
		if got := deploymentPhase(obs.steps[i]); got != w {
			t.Errorf("step %s: %s, want %s", obs.steps[i].model, got, w)
		}
	}
}

// computeStatus fills in phase and each step's Deployment phase from the
// same observation as the conditions; read as v1beta1, they are the design
// notes' detailPhase and stepCount, as the controller wrote them at v1beta1.
func TestComputeStatusPhase(t *testing.T) {
	now := metav1.Now()
	p := stored(samplePipeline())
	status := computeStatus(p, world(p), now)
	if status.Phase != pipelinev1.PhaseRunning || status.Models != "facedetection-1,facedetection-2" {
		t.Errorf("converged: phase %q, models %q; want Running, facedetection-1,facedetection-2", status.Phase, status.Models)
	}
	d := v1beta1Status(t, p, status).DetailPhase
	if d == nil || d.PVPhase != corev1.VolumeBound || d.PVCPhase != corev1.ClaimBound || len(d.StepsPhase) != 2 ||
		d.StepsPhase[0] != (pipelinev1beta1.StepPhase{Model: "facedetection-1", DeploymentPhase: "Available"}) {
		t.Errorf("converged: detailPhase %+v", d)
	}
	if n := v1beta1Status(t, p, status).StepCount; n != 2 {
		t.Errorf("converged: stepCount %d, want 2", n)
	}

	pending := world(p)
	pending.claim.Status.Phase = corev1.ClaimPending
	pending.steps[1].deployment = nil
	status = computeStatus(p, pending, now)
	if status.Phase != pipelinev1.PhasePending || status.Storage.PVCPhase != corev1.ClaimPending ||
		status.Steps[1].DeploymentPhase != pipelinev1.DeploymentPhaseMissing {
		t.Errorf("pending: phase %q, status %+v", status.Phase, status)
	}
	if d := v1beta1Status(t, p, status).DetailPhase; d.PVCPhase != corev1.ClaimPending || d.StepsPhase[1].DeploymentPhase != pipelinev1beta1.DeploymentPhaseMissing {
		t.Errorf("pending: detailPhase %+v", d)
	}

	failed := world(p)
	failed.failures = append(failed.failures, errors.New("writing the Service: boom"))
	if status = computeStatus(p, failed, now); status.Phase != pipelinev1.PhaseFailed {
		t.Errorf("degraded: phase %q, want Failed", status.Phase)
	}
}

// v1beta1Status is status, written to p, as a v1beta1 client reads it.
func v1beta1Status(t *testing.T, p *pipelinev1.Pipeline, status pipelinev1.PipelineStatus) pipelinev1beta1.PipelineStatus {
	t.Helper()
	written := p.DeepCopy()
	written.Status = status
	var out pipelinev1beta1.Pipeline
	if err := conversion.V1ToV1beta1(written, &out); err != nil {
		t.Fatal(err)
	}
	return out.Status
}
