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
	"fmt"
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

// BenchmarkUnwanted is one reconcile's search for the Deployments a
// Pipeline no longer wants, in a cache of 200 Pipelines' 5 steps and 3000
// other managed Deployments (an App's each), as the benchmark's profile
// pass saw it: its cost should not grow with the cache.
func BenchmarkUnwanted(b *testing.B) {
	client := fake.NewClientset()
	informer := informers.NewSharedInformerFactory(client, 0).Apps().V1().Deployments()
	deployments := controller.NewDeployments(informer, client)
	if err := deployments.IndexByController(pipelineGroupKind); err != nil {
		b.Fatal(err)
	}
	store := informer.Informer().GetIndexer()
	add := func(d *appsv1.Deployment) {
		if err := store.Add(d); err != nil {
			b.Fatal(err)
		}
	}
	pipelines := make([]*pipelinev1.Pipeline, 200)
	for i := range pipelines {
		p := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("p-uid-%d", i))}}
		pipelines[i] = p
		for s := range 5 {
			add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("%s-%d", p.Name, s),
				Labels: map[string]string{controller.ManagedByLabel: controller.ManagedByValue, LabelPipeline: p.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: pipelinev1.SchemeGroupVersion.String(), Kind: "Pipeline",
					Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}}})
		}
	}
	for i := range 3000 {
		add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("app-%d", i),
			Labels: map[string]string{controller.ManagedByLabel: controller.ManagedByValue, "app.kubernetes.io/name": "app"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "ingress.example.com/v1beta1", Kind: "App",
				Name: fmt.Sprintf("app-%d", i), UID: types.UID(fmt.Sprintf("app-uid-%d", i)), Controller: ptr.To(true)}}}})
	}
	p := pipelines[100]
	var want []*appsv1ac.DeploymentApplyConfiguration
	for s := range 4 { // one step removed
		want = append(want, appsv1ac.Deployment(fmt.Sprintf("%s-%d", p.Name, s), "bench"))
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := unwanted(deployments, p, want)
		if err != nil || len(got) != 1 {
			b.Fatalf("unwanted = %d objects, %v; want 1", len(got), err)
		}
	}
}
