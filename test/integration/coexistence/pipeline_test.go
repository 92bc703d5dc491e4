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

package coexistence

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/controllers/pipeline"
)

// newPipeline is a Pipeline of the given steps, its children in namespace;
// each step runs on its location, a kwok node.
func newPipeline(name, namespace string, steps ...pipelinev1beta1.PipelineStep) *pipelinev1beta1.Pipeline {
	return &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps:     steps,
			Namespace: namespace,
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "192.0.2.10", "share": "/models"},
			},
		},
	}
}

// step serves model on node, with replicas left unset.
func step(model, node string) pipelinev1beta1.PipelineStep {
	return pipelinev1beta1.PipelineStep{Model: model, Image: "nginx:1.27", Location: node}
}

// createPipeline creates p and deletes it when the test ends.
func createPipeline(t *testing.T, p *pipelinev1beta1.Pipeline) *pipelinev1beta1.Pipeline {
	t.Helper()
	pipelines := crdClient(t).PipelineV1beta1().Pipelines()
	created, err := pipelines.Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Pipeline %s: %v", p.Name, err)
	}
	t.Cleanup(func() {
		if err := pipelines.Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Pipeline %s: %v", p.Name, err)
		}
	})
	return created
}

// pipelineReady waits until the Pipeline reports Ready=True for its latest
// generation.
func pipelineReady(t *testing.T, name string) *pipelinev1beta1.Pipeline {
	t.Helper()
	var p *pipelinev1beta1.Pipeline
	eventually(t, "Pipeline "+name+" to be Ready", func(ctx context.Context) (bool, error) {
		var err error
		if p, err = crdClient(t).PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, pipelinev1beta1.ConditionReady)
		if p.Status.ObservedGeneration != p.Generation || c == nil || c.Status != metav1.ConditionTrue {
			return false, errorf("generation %d observed %d, conditions %s", p.Generation, p.Status.ObservedGeneration, conditions(p))
		}
		return true, nil
	})
	return p
}

func conditions(p *pipelinev1beta1.Pipeline) string {
	var parts []string
	for _, c := range p.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, " ")
}

// TestHPAOnPipelineStep puts an HPA on the Deployment of a Pipeline step
// that leaves replicas unset: the HPA scales it and the manager leaves the
// replicas to it, with no write.
func TestHPAOnPipelineStep(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	p := createPipeline(t, newPipeline("coexist-hpa", ns, step("llama", gpuNodeA)))
	pipelineReady(t, p.Name)
	d := deploymentOf(t, ns, p.UID)
	available(t, ns, d.Name, 1)
	writes := managerWrites(deploymentsPath(ns), d.Name)
	loadPods(t, ns)
	createHPA(t, ns, deploymentTarget(d.Name))
	scaledBy(t, ns, d.Name)
	leftToHPA(t, ns, d.Name, writes)
}

// TestPipelineNamesDoNotCollide runs Pipelines a-b (model c) and a (model
// b-c) in one namespace, whose names and models concatenate alike: both
// converge, and each step sends to a Service its own Pipeline controls.
func TestPipelineNamesDoNotCollide(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	first := createPipeline(t, newPipeline("a-b", ns, step("c", gpuNodeA)))
	second := createPipeline(t, newPipeline("a", ns, step("b-c", gpuNodeB)))
	for _, p := range []*pipelinev1beta1.Pipeline{first, second} {
		pipelineReady(t, p.Name)
	}
	ctx := context.Background()
	deployments, err := cp.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*pipelinev1beta1.Pipeline{first, second} {
		var steps []*appsv1.Deployment
		for i := range deployments.Items {
			if controlledBy(&deployments.Items[i], p.UID) {
				steps = append(steps, &deployments.Items[i])
			}
		}
		if len(steps) != len(p.Spec.Steps) {
			t.Errorf("Pipeline %s controls %d Deployments, want one per step (%d)", p.Name, len(steps), len(p.Spec.Steps))
		}
		for _, d := range steps {
			dst := envValue(d, pipeline.EnvDST)
			service, _, _ := strings.Cut(dst, ".")
			svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, service, metav1.GetOptions{})
			if err != nil {
				t.Errorf("Pipeline %s, Deployment %s sends to %q: %v", p.Name, d.Name, dst, err)
				continue
			}
			if !controlledBy(svc, p.UID) {
				t.Errorf("Pipeline %s, Deployment %s sends to %q, a Service controlled by %+v, not by its Pipeline",
					p.Name, d.Name, dst, metav1.GetControllerOf(svc))
			}
		}
	}
}

// envValue is the value of the env var name in the first container.
func envValue(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
