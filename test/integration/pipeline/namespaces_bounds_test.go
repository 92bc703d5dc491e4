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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// checkNothingWritten fails when any child of Pipeline name exists.
func checkNothingWritten(t *testing.T, e *env, name string) {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{pipeline.LabelPipeline: name}).String()}
	deployments, err := e.kube.AppsV1().Deployments("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	volumes, err := e.kube.CoreV1().PersistentVolumes().List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(deployments.Items) + len(volumes.Items); n != 0 {
		t.Errorf("refused Pipeline %s got %d Deployments and %d volumes; want none", name, len(deployments.Items), len(volumes.Items))
	}
}

// "*" leaves out the cluster's own namespaces and the manager's: a
// Pipeline aimed at kube-public is refused like one outside the list, while
// an explicit entry still allows one (issue 35, item 4).
func TestStarLeavesOutSystemNamespaces(t *testing.T) {
	const manager = "star-manager-ns"
	e := setup(t, func(o *options.Options) {
		o.Pipeline.AllowedNamespaces = []string{pipeline.AnyNamespace, metav1.NamespaceSystem}
		o.Webhook.Namespace = manager
	})
	if err := cp.CreateFakeNodes(context.Background(), "star-node"); err != nil {
		t.Fatal(err)
	}
	public := e.create(newPipeline("star-public", metav1.NamespacePublic, step("a", "star-node")))
	own := e.create(newPipeline("star-manager", manager, step("a", "star-node")))
	e.create(newPipeline("star-system", metav1.NamespaceSystem, step("a", "star-node")))

	for _, name := range []string{public.Name, own.Name} {
		p := e.waitCondition(name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "is not allowed for Pipelines")
		if c := conditionOf(p, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonNamespaceNotAllowed {
			t.Errorf("Pipeline %s: Degraded reason = %q, want %q", name, c.Reason, pipelinev1beta1.ReasonNamespaceNotAllowed)
		}
	}
	e.waitDeployments("star-system", stepName("star-system", "a"))
	checkNothingWritten(t, e, public.Name)
	checkNothingWritten(t, e, own.Name)
}

// Without --pipeline-create-namespaces a Pipeline aimed at a missing
// namespace gets nothing and says why; it converges once someone creates
// the namespace, and a deleted namespace is not created again (issue 35,
// item 4).
func TestMissingNamespaceIsNotCreated(t *testing.T) {
	ctx := context.Background()
	e := setup(t, func(o *options.Options) { o.Pipeline.CreateNamespaces = false })
	const ns = "missing-ns"
	if err := cp.CreateFakeNodes(ctx, "missing-node"); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("missing", ns, step("a", "missing-node")))
	got := e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "--pipeline-create-namespaces")
	if c := conditionOf(got, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonNamespaceNotFound {
		t.Errorf("Degraded reason = %q, want %q", c.Reason, pipelinev1beta1.ReasonNamespaceNotFound)
	}
	waitWarning(t, e, p.Name, pipelinev1beta1.ReasonNamespaceNotFound)
	if _, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s: %v; want it not created", ns, err)
	}
	checkNothingWritten(t, e, p.Name)

	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDeployments(p.Name, stepName(p.Name, "a"))
	e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionFalse, "")

	if err := e.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "namespace "+ns+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "namespace "+ns+" does not exist")
	if _, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v; want it not created again", ns, err)
	}
}

// A Pipeline whose directory on the export holds an older Pipeline's
// ("team1" on /exports reaches /exports/team1, where "a" of share
// /exports/team1 keeps its models) is refused, whatever name the server goes
// by; once the older one is gone it gets its children (issue 35, item 5).
func TestOverlappingStorageIsRefused(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "overlap-node"); err != nil {
		t.Fatal(err)
	}
	victim := newPipeline("overlap-a", ns, step("a", "overlap-node"))
	victim.Spec.ModelStorage.CSIParameter = map[string]string{"server": "10.0.0.1", "share": "/exports/overlap-team1"}
	victim = e.create(victim)
	e.waitDeployments(victim.Name, stepName(victim.Name, "a"))
	// Its status too: the check below reads it once, and under load it was
	// not written yet (an empty condition is not False).
	e.waitCondition(victim.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionFalse, "")

	thief := newPipeline("overlap-team1", ns, step("a", "overlap-node"))
	thief.Spec.ModelStorage.CSIParameter = map[string]string{"server": "nfs.example.com", "share": "/exports/"}
	thief = e.create(thief)
	got := e.waitCondition(thief.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "older Pipeline overlap-a")
	if c := conditionOf(got, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonStorageOverlap {
		t.Errorf("Degraded reason = %q, want %q", c.Reason, pipelinev1beta1.ReasonStorageOverlap)
	}
	t.Logf("refused: %s", conditionOf(got, pipelinev1beta1.ConditionDegraded).Message)
	waitWarning(t, e, thief.Name, pipelinev1beta1.ReasonStorageOverlap)
	checkNothingWritten(t, e, thief.Name)
	if c := conditionOf(e.get(victim.Name), pipelinev1beta1.ConditionDegraded); c.Status != metav1.ConditionFalse {
		t.Errorf("the older Pipeline is Degraded: %s", c.Message)
	}

	e.deletePipeline(victim.Name, true)
	e.waitDeployments(thief.Name, stepName(thief.Name, "a"))
}

// A step asking for more replicas than --pipeline-max-replicas (100 by
// default) gets the Pipeline refused, naming the step, the value and the
// flag (issue 35, item 8).
func TestReplicasAboveTheBoundAreRefused(t *testing.T) {
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	s := step("big", "bound-node")
	s.Replicas = ptr.To[int32](101)
	p := e.create(newPipeline("bound", ns, s))
	got := e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "step big asks for 101 replicas, more than the 100 allowed (--pipeline-max-replicas)")
	if c := conditionOf(got, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonTooManyReplicas {
		t.Errorf("Degraded reason = %q, want %q", c.Reason, pipelinev1beta1.ReasonTooManyReplicas)
	}
	checkNothingWritten(t, e, p.Name)
}
