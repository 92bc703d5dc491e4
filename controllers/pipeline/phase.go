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
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

// phaseOf sums the conditions up in the design notes' one word: Failed
// while Degraded, Running while Ready, Pending otherwise.
func phaseOf(conditions []metav1.Condition) pipelinev1beta1.Phase {
	switch {
	case meta.IsStatusConditionTrue(conditions, pipelinev1beta1.ConditionDegraded):
		return pipelinev1beta1.PhaseFailed
	case meta.IsStatusConditionTrue(conditions, pipelinev1beta1.ConditionReady):
		return pipelinev1beta1.PhaseRunning
	default:
		return pipelinev1beta1.PhasePending
	}
}

// deploymentPhase is the one word for what a reconcile saw of a step's
// Deployment.
func deploymentPhase(s observedStep) pipelinev1beta1.DeploymentPhase {
	switch d := s.deployment; {
	case d == nil:
		return pipelinev1beta1.DeploymentPhaseMissing
	case d.DeletionTimestamp != nil:
		return pipelinev1beta1.DeploymentPhaseTerminating
	case deploymentReady(d):
		return pipelinev1beta1.DeploymentPhaseAvailable
	default:
		return pipelinev1beta1.DeploymentPhaseProgressing
	}
}

// detailPhaseOf is the design notes' detailPhase: the phases of the
// volume, the claim and each step's Deployment, as observed.
func detailPhaseOf(obs observed, storage *pipelinev1beta1.StorageStatus) *pipelinev1beta1.DetailPhase {
	d := &pipelinev1beta1.DetailPhase{}
	if storage != nil {
		d.PVPhase, d.PVCPhase = storage.PVPhase, storage.PVCPhase
	}
	for _, s := range obs.steps {
		d.StepsPhase = append(d.StepsPhase, pipelinev1beta1.StepPhase{Model: s.model, DeploymentPhase: deploymentPhase(s)})
	}
	return d
}

// modelsOf is the steps' models, comma-separated, for the Models column.
func modelsOf(p *pipelinev1beta1.Pipeline) string {
	models := make([]string, len(p.Spec.Steps))
	for i, s := range p.Spec.Steps {
		models[i] = s.Model
	}
	return strings.Join(models, ",")
}
