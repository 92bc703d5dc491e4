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
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Both sample forms of the design notes apply unchanged and converge in the
// default namespace, which the install creates: bound storage, one
// Deployment and Service per step, pods Ready on (kwok) nodes the samples name.
// Invalid Pipelines are rejected by the API server; test/integration/crd
// covers that (duplicate models, no steps, nfs without server, unknown
// storage type and more) for both versions.
func TestSamplesApplyUnchangedAndConverge(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	if err := cp.CreateFakeNodes(ctx, "xx-test-node236", "xx-test-node239", "node-a"); err != nil {
		t.Fatal(err)
	}
	namespace := pipeline.DefaultOptions().DefaultNamespace
	// The install creates it (manifests/pipeline-namespace); the controller
	// does not.
	var ns corev1.Namespace
	framework.LoadManifest(t, "pipeline-namespace/namespace.yaml", &ns)
	if ns.Name != namespace {
		t.Fatalf("manifests/pipeline-namespace creates %s, not --pipeline-namespace's default %s", ns.Name, namespace)
	}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	t.Run("v1beta1 with location", func(t *testing.T) {
		var sample pipelinev1beta1.Pipeline
		framework.LoadManifest(t, "samples/pipeline-v1beta1.yaml", &sample)
		created, err := e.crd.PipelineV1beta1().Pipelines().Create(ctx, &sample, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating the v1beta1 sample: %v", err)
		}
		defer e.deletePipeline(created.Name, true)
		p := e.ready(created.Name)
		checkChildren(t, e.kube, p, namespace)
		checkReadyStatus(t, p)
	})

	// The v1 sample, converted as the conversion webhook does (this
	// package runs no webhook; test/integration/webhooks goes through it).
	t.Run("v1 with nodeNames and replicas", func(t *testing.T) {
		var v1Sample pipelinev1.Pipeline
		framework.LoadManifest(t, "samples/pipeline-v1.yaml", &v1Sample)
		var sample pipelinev1beta1.Pipeline
		if err := conversion.V1ToV1beta1(&v1Sample, &sample); err != nil {
			t.Fatal(err)
		}
		created, err := e.crd.PipelineV1beta1().Pipelines().Create(ctx, &sample, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating the v1 sample: %v", err)
		}
		defer e.deletePipeline(created.Name, true)
		p := e.ready(created.Name) // read as v1beta1, the storage version
		checkChildren(t, e.kube, p, namespace)
		checkReadyStatus(t, p)
		for _, s := range p.Status.Steps {
			if s.Replicas != 2 || s.ReadyReplicas != 2 {
				t.Errorf("step %s: %d/%d ready, want 2/2", s.Model, s.ReadyReplicas, s.Replicas)
			}
		}
	})
}

// checkReadyStatus checks the status of a Ready Pipeline.
func checkReadyStatus(t *testing.T, p *pipelinev1beta1.Pipeline) {
	t.Helper()
	t.Logf("status: %s", describeStatus(p))
	if p.Status.StepCount != int32(len(p.Spec.Steps)) {
		t.Errorf("stepCount = %d", p.Status.StepCount)
	}
	if s := p.Status.Storage; s.PVPhase != corev1.VolumeBound || s.PVCPhase != corev1.ClaimBound {
		t.Errorf("storage = %+v, want both Bound", s)
	}
	for _, typ := range []string{pipelinev1beta1.ConditionReady, pipelinev1beta1.ConditionStorageReady, pipelinev1beta1.ConditionStepsReady} {
		if !hasCondition(p, typ, metav1.ConditionTrue, "") {
			t.Errorf("%s is not True: %s", typ, describeStatus(p))
		}
	}
	if !hasCondition(p, pipelinev1beta1.ConditionDegraded, metav1.ConditionFalse, "") {
		t.Errorf("Degraded is not False: %s", describeStatus(p))
	}
	for _, s := range p.Status.Steps {
		if s.ReadyReplicas != s.Replicas || s.Replicas == 0 {
			t.Errorf("step %s: %d/%d ready", s.Model, s.ReadyReplicas, s.Replicas)
		}
	}
}
