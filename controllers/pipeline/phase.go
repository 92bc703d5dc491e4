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

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
)

// phaseOf sums the conditions up in the design notes' one word: Failed
// while Degraded, Running while Ready, Pending otherwise.
func phaseOf(conditions []metav1.Condition) pipelinev1.Phase {
	switch {
	case meta.IsStatusConditionTrue(conditions, pipelinev1.ConditionDegraded):
		return pipelinev1.PhaseFailed
	case meta.IsStatusConditionTrue(conditions, pipelinev1.ConditionReady):
		return pipelinev1.PhaseRunning
	default:
		return pipelinev1.PhasePending
	}
}

// deploymentPhase is the one word for what a reconcile saw of a step's
// Deployment.
func deploymentPhase(s observedStep) string {
	switch d := s.deployment; {
	case d == nil:
		return pipelinev1.DeploymentPhaseMissing
	case d.DeletionTimestamp != nil:
		return pipelinev1.DeploymentPhaseTerminating
	case deploymentReady(d):
		return pipelinev1.DeploymentPhaseAvailable
	default:
		return pipelinev1.DeploymentPhaseProgressing
	}
}

// modelsOf is the steps' models, comma-separated, for the Models column.
func modelsOf(p *pipelinev1.Pipeline) string {
	models := make([]string, len(p.Spec.Steps))
	for i, s := range p.Spec.Steps {
		models[i] = s.Model
	}
	return strings.Join(models, ",")
}
