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
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// availableDeployment asks for replicas and has available of them, rolled
// out.
func availableDeployment(replicas, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas,
			UpdatedReplicas: replicas, ReadyReplicas: available, AvailableReplicas: available},
	}
}

func TestMayReplace(t *testing.T) {
	serving := []*appsv1.Deployment{availableDeployment(1, 1), availableDeployment(2, 0)}
	idle := []*appsv1.Deployment{availableDeployment(1, 0), availableDeployment(0, 0)}
	steps := func(deployments ...*appsv1.Deployment) []observedStep {
		var s []observedStep
		for _, d := range deployments {
			s = append(s, observedStep{deployment: d})
		}
		return s
	}
	notObserved := availableDeployment(1, 1)
	notObserved.Generation = 3
	terminating := availableDeployment(1, 1)
	terminating.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name  string
		steps []observedStep
		old   []*appsv1.Deployment
		want  bool
	}{
		{"every new step available", steps(availableDeployment(1, 1), availableDeployment(3, 3)), serving, true},
		{"a new step scaled to zero counts as available", steps(availableDeployment(1, 1), availableDeployment(0, 0)), serving, true},
		{"a new step not yet available, the old ones serving", steps(availableDeployment(1, 1), availableDeployment(3, 2)), serving, false},
		{"a new step missing, the old ones serving", steps(availableDeployment(1, 1), nil), serving, false},
		{"a new step's rollout not observed yet", steps(notObserved), serving, false},
		{"a new step being deleted", steps(terminating), serving, false},
		{"the old ones serve nothing", steps(availableDeployment(1, 0), nil), idle, true},
		{"no old Deployment", steps(nil), nil, true},
	}
	for _, tc := range cases {
		if got := mayReplace(tc.steps, tc.old); got != tc.want {
			t.Errorf("%s: mayReplace = %v, want %v", tc.name, got, tc.want)
		}
	}
}
