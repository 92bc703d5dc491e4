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
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
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
		name       string
		steps      []observedStep
		old        []*appsv1.Deployment
		oldStorage bool
		want       bool
	}{
		{"every new step available", steps(availableDeployment(1, 1), availableDeployment(3, 3)), serving, false, true},
		{"a new step scaled to zero counts as available", steps(availableDeployment(1, 1), availableDeployment(0, 0)), serving, false, true},
		{"a new step not yet available, the old ones serving", steps(availableDeployment(1, 1), availableDeployment(3, 2)), serving, false, false},
		{"a new step missing, the old ones serving", steps(availableDeployment(1, 1), nil), serving, false, false},
		{"a new step's rollout not observed yet", steps(notObserved), serving, false, false},
		{"a new step being deleted", steps(terminating), serving, false, false},
		{"the old ones serve nothing", steps(availableDeployment(1, 0), nil), idle, false, true},
		{"no old Deployment", steps(nil), nil, false, true},
		// A storage change rolls the steps in place: their old pods mount
		// the old claim until the rollout is done.
		{"old storage, a step rolling onto the new claim", steps(availableDeployment(1, 1), notObserved), nil, true, false},
		{"old storage, a step missing", steps(nil), nil, true, false},
		{"old storage, every step available", steps(availableDeployment(1, 1), availableDeployment(2, 2)), nil, true, true},
	}
	for _, tc := range cases {
		if got := mayReplace(tc.steps, tc.old, tc.oldStorage); got != tc.want {
			t.Errorf("%s: mayReplace = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// unwanted finds, through the index by controller, what the label selector
// found before it: the Pipeline's labelled children that it controls and no
// longer wants; not a child that lost the label, nor one of an earlier
// Pipeline of the same name, nor an object nobody controls.
func TestUnwanted(t *testing.T) {
	client := fake.NewClientset()
	informer := informers.NewSharedInformerFactory(client, 0).Apps().V1().Deployments()
	deployments := controller.NewDeployments(informer, client)
	if err := deployments.IndexByController(pipelineGroupKind); err != nil {
		t.Fatal(err)
	}
	p := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "demo", UID: "pipeline-uid"}}
	deployment := func(name string, controllerUID types.UID, labelled bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if labelled {
			d.Labels = map[string]string{LabelPipeline: "demo"}
		}
		if controllerUID != "" {
			d.OwnerReferences = []metav1.OwnerReference{{APIVersion: pipelinev1.SchemeGroupVersion.String(), Kind: "Pipeline",
				Name: "demo", UID: controllerUID, Controller: ptr.To(true)}}
		}
		return d
	}
	for _, d := range []*appsv1.Deployment{
		deployment("old", p.UID, true),
		deployment("wanted", p.UID, true),
		deployment("label-removed", p.UID, false),
		deployment("earlier-pipeline", "earlier-uid", true),
		deployment("nobodys", "", true),
	} {
		if err := informer.Informer().GetIndexer().Add(d); err != nil {
			t.Fatal(err)
		}
	}
	got, err := unwanted(deployments, p, []*appsv1ac.DeploymentApplyConfiguration{appsv1ac.Deployment("wanted", "ns")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "old" {
		var names []string
		for _, d := range got {
			names = append(names, d.Name)
		}
		t.Errorf("unwanted = %v, want [old]", names)
	}
}
