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
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// waitDeployments waits until exactly the Deployments named want carry the
// Pipeline's label (ones being deleted do not count).
func (e *env) waitDeployments(name string, want ...string) {
	e.t.Helper()
	slices.Sort(want)
	framework.Eventually(e.t, timeout, fmt.Sprintf("Deployments %v of %s", want, name), func(ctx context.Context) (bool, error) {
		items, err := deploymentsOf(ctx, e.kube, name)
		if err != nil {
			return false, err
		}
		var have []string
		for _, d := range items {
			if d.DeletionTimestamp == nil {
				have = append(have, d.Name)
			}
		}
		slices.Sort(have)
		if !slices.Equal(have, want) {
			return false, fmt.Errorf("have %v", have)
		}
		return true, nil
	})
}

// waitGone waits until get reports NotFound.
func waitGone(t *testing.T, what string, get func(ctx context.Context) error) {
	t.Helper()
	framework.Eventually(t, timeout, what+" to be deleted", func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// Steps added, removed, renamed and reordered converge: new children are
// created, the ones of removed or renamed steps deleted, DST and BEGIN follow
// the order.
func TestStepChangesConverge(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "steps-node"); err != nil {
		t.Fatal(err)
	}
	const name = "steps"
	p := e.create(newPipeline(name, ns, step("a", "steps-node"), step("b", "steps-node")))
	checkChildren(t, e.kube, e.ready(p.Name), ns)

	converged := func(what string, deployments ...string) {
		t.Helper()
		e.waitDeployments(name, deployments...)
		p := e.ready(name)
		checkChildren(t, e.kube, p, ns)
		t.Logf("%s: converged at generation %d", what, p.Generation)
	}

	e.update(name, func(p *pipelinev1beta1.Pipeline) {
		c := step("c", "steps-node")
		c.Args = map[string]string{"threshold": "0.5", "batch": "8"}
		c.Replicas = ptr.To[int32](2)
		p.Spec.Steps = append(p.Spec.Steps, c)
	})
	converged("step c added", stepName(name, "a"), stepName(name, "b"), stepName(name, "c"))

	e.update(name, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps = slices.Delete(p.Spec.Steps, 1, 2) })
	converged("step b removed", stepName(name, "a"), stepName(name, "c"))
	waitGone(t, "Service steps-b", func(ctx context.Context) error {
		_, err := e.kube.CoreV1().Services(ns).Get(ctx, stepName(name, "b"), metav1.GetOptions{})
		return err
	})

	e.update(name, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[1].Model = "d" })
	converged("step c renamed d", stepName(name, "a"), stepName(name, "d"))
	waitGone(t, "Service steps-c", func(ctx context.Context) error {
		_, err := e.kube.CoreV1().Services(ns).Get(ctx, stepName(name, "c"), metav1.GetOptions{})
		return err
	})

	// Reordering keeps the names (no selector change) and moves BEGIN.
	before, err := e.kube.AppsV1().Deployments(ns).Get(ctx, stepName(name, "d"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.update(name, func(p *pipelinev1beta1.Pipeline) {
		p.Spec.Steps[0], p.Spec.Steps[1] = p.Spec.Steps[1], p.Spec.Steps[0]
		p.Spec.Steps[1].Image = "nginx:1.27"
	})
	converged("steps reordered", stepName(name, "a"), stepName(name, "d"))
	after, err := e.kube.AppsV1().Deployments(ns).Get(ctx, stepName(name, "d"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		t.Error("reordering replaced the Deployment instead of updating it")
	}
}

// A changed namespace moves every child: new ones in the new namespace
// (created by the controller), the old ones deleted, the old namespace kept.
func TestNamespaceChangeMovesChildren(t *testing.T) {
	ctx := context.Background()
	e := setup(t, func(o *options.Options) { o.Pipeline.CreateNamespaces = true })
	oldNS := framework.CreateNamespace(t, e.kube)
	newNS := "pipeline-moved-" + rand.String(5)
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), newNS, metav1.DeleteOptions{}) })
	if err := cp.CreateFakeNodes(ctx, "move-node"); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("move", oldNS, step("a", "move-node"), step("b", "move-node")))
	old := e.ready(p.Name)
	checkChildren(t, e.kube, old, oldNS)

	e.update(p.Name, func(p *pipelinev1beta1.Pipeline) { p.Spec.Namespace = newNS })
	moved := e.waitFor(p.Name, "children in the new namespace, Ready", func(p *pipelinev1beta1.Pipeline) bool {
		return hasCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "") && strings.Contains(
			conditionOf(p, pipelinev1beta1.ConditionStorageReady).Message, newNS+"/")
	})
	checkChildren(t, e.kube, moved, newNS)
	if moved.Status.Storage.PVName == old.Status.Storage.PVName {
		t.Errorf("the volume %s was kept: its claim reference names the old namespace", old.Status.Storage.PVName)
	}

	for _, s := range old.Status.Steps {
		waitGone(t, "old Deployment "+s.DeploymentName, func(ctx context.Context) error {
			_, err := e.kube.AppsV1().Deployments(oldNS).Get(ctx, s.DeploymentName, metav1.GetOptions{})
			return err
		})
		waitGone(t, "old Service "+s.ServiceName, func(ctx context.Context) error {
			_, err := e.kube.CoreV1().Services(oldNS).Get(ctx, s.ServiceName, metav1.GetOptions{})
			return err
		})
	}
	waitGone(t, "old PersistentVolumeClaim", func(ctx context.Context) error {
		_, err := e.kube.CoreV1().PersistentVolumeClaims(oldNS).Get(ctx, old.Status.Storage.PVCName, metav1.GetOptions{})
		return err
	})
	waitGone(t, "old PersistentVolume", func(ctx context.Context) error {
		_, err := e.kube.CoreV1().PersistentVolumes().Get(ctx, old.Status.Storage.PVName, metav1.GetOptions{})
		return err
	})

	oldNamespace, err := e.kube.CoreV1().Namespaces().Get(ctx, oldNS, metav1.GetOptions{})
	if err != nil || oldNamespace.DeletionTimestamp != nil {
		t.Errorf("the old namespace was deleted: %v", err)
	}
	created, err := e.kube.CoreV1().Namespaces().Get(ctx, newNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Labels[controller.ManagedByLabel] != controller.ManagedByValue || len(created.OwnerReferences) != 0 {
		t.Errorf("created namespace: labels %v owners %v; want managed-by and no owner", created.Labels, created.OwnerReferences)
	}
}

func conditionOf(p *pipelinev1beta1.Pipeline, typ string) metav1.Condition {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// A child deleted or edited by hand is put back; what others add is kept.
func TestChildrenDeletedOrEditedByHandAreRepaired(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "repair-node"); err != nil {
		t.Fatal(err)
	}
	// Step b's replicas are set, so they are the controller's to keep.
	b := step("b", "repair-node")
	b.Replicas = ptr.To[int32](1)
	p := e.create(newPipeline("repair", ns, step("a", "repair-node"), b))
	p = e.ready(p.Name)
	deployments := e.kube.AppsV1().Deployments(ns)
	services := e.kube.CoreV1().Services(ns)

	d, err := deployments.Get(ctx, stepName(p.Name, "a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := deployments.Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := services.Get(ctx, stepName(p.Name, "b"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := services.Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the deleted Deployment and Service to be recreated", func(ctx context.Context) (bool, error) {
		newD, err := deployments.Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		newSvc, err := services.Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return newD.UID != d.UID && newSvc.UID != svc.UID, nil
	})
	checkChildren(t, e.kube, e.ready(p.Name), ns)

	// A hand edit of a field the controller sets is reverted; a label it
	// does not set survives.
	framework.Eventually(t, timeout, "a hand edit", func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, stepName(p.Name, "b"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		d.Spec.Template.Spec.Containers[0].Image = "busybox:hand-edited"
		d.Spec.Replicas = ptr.To[int32](3)
		d.Labels["team"] = "vision"
		_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
		return err == nil, err
	})
	framework.Eventually(t, timeout, "the hand edit to be reverted", func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, stepName(p.Name, "b"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Spec.Template.Spec.Containers[0].Image == "docker.io/library/nginx:latest" && *d.Spec.Replicas == 1 && d.Labels["team"] == "vision", nil
	})
}

// A same-name Deployment the Pipeline does not control is never touched: the
// Pipeline reports Degraded with a Warning event, still writes its status and
// its other children, and converges once the object is gone.
func TestUnownedDeploymentIsLeftAloneAndReported(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "conflict-node"); err != nil {
		t.Fatal(err)
	}
	theirs := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stepName("conflict", "a"), Labels: map[string]string{"owner": "someone-else"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	theirs, err := e.kube.AppsV1().Deployments(ns).Create(ctx, theirs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	p := e.create(newPipeline("conflict", ns, step("a", "conflict-node"), step("b", "conflict-node")))
	degraded := e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "Deployment "+ns+"/"+stepName("conflict", "a")+" exists and is not ours")
	if c := conditionOf(degraded, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonResourceExists {
		t.Errorf("Degraded reason = %s", c.Reason)
	}
	if !hasCondition(degraded, pipelinev1beta1.ConditionStepsReady, metav1.ConditionFalse, "not controlled by this Pipeline") ||
		!hasCondition(degraded, pipelinev1beta1.ConditionReady, metav1.ConditionFalse, "") {
		t.Errorf("status: %s", describeStatus(degraded))
	}
	// The rest was made anyway.
	for _, get := range []func() error{
		func() error {
			_, err := e.kube.AppsV1().Deployments(ns).Get(ctx, stepName("conflict", "b"), metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := e.kube.CoreV1().Services(ns).Get(ctx, stepName("conflict", "a"), metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := e.kube.CoreV1().PersistentVolumes().Get(ctx, degraded.Status.Storage.PVName, metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Errorf("a child not in conflict is missing: %v", err)
		}
	}
	waitWarning(t, e, p.Name, pipelinev1beta1.ReasonResourceExists)

	got, err := e.kube.AppsV1().Deployments(ns).Get(ctx, stepName("conflict", "a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Its resourceVersion moves (the Deployment controller writes its
	// status); what must not change is anything we would write.
	if got.Generation != theirs.Generation || len(got.OwnerReferences) != 0 || len(got.Labels) != 1 ||
		got.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("the unowned Deployment was modified: generation %d -> %d, owners %v, labels %v",
			theirs.Generation, got.Generation, got.OwnerReferences, got.Labels)
	}
	for _, mf := range got.ManagedFields {
		if mf.Manager == controller.FieldManager {
			t.Errorf("the controller wrote the unowned Deployment: %+v", mf)
		}
	}

	// Once it is gone the retry (with backoff) takes the name.
	if err := e.kube.AppsV1().Deployments(ns).Delete(ctx, stepName("conflict", "a"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionFalse, "")
	checkChildren(t, e.kube, e.ready(p.Name), ns)
}

// waitWarning waits for a Warning event with reason on the Pipeline. Events
// of cluster-scoped objects live in the default namespace.
func waitWarning(t *testing.T, e *env, name, reason string) {
	t.Helper()
	framework.Eventually(t, timeout, "a Warning event "+reason, func(ctx context.Context) (bool, error) {
		events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
			"involvedObject.kind": "Pipeline", "involvedObject.name": name, "reason": reason, "type": corev1.EventTypeWarning,
		}).String()})
		return err == nil && len(events.Items) > 0, err
	})
}

// A write the API server refuses (a quota allowing no Services) leaves the
// Pipeline Degraded with the reason, its status still written for the new
// generation; lifting the quota lets it converge. The step's Deployment,
// which the quota allows, is not written either: its DST would name the
// Service that could not be created.
func TestStatusIsWrittenWhenAChildWriteFails(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "quota-node"); err != nil {
		t.Fatal(err)
	}
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-services"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}},
	}
	if _, err := e.kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	p := e.create(newPipeline("quota", ns, step("a", "quota-node")))
	degraded := e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "create Service "+ns+"/"+stepName("quota", "a"))
	if c := conditionOf(degraded, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonReconcileFailed || !strings.Contains(c.Message, "quota") {
		t.Errorf("Degraded = %+v", c)
	}
	if degraded.Status.ObservedGeneration != degraded.Generation || len(degraded.Status.Steps) != 1 || degraded.Status.Storage == nil {
		t.Errorf("status not written for the failed reconcile: %+v", degraded.Status)
	}
	if _, err := e.kube.AppsV1().Deployments(ns).Get(ctx, stepName("quota", "a"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment whose DST names the Service the quota refuses was written: %v", err)
	}
	if !hasCondition(degraded, pipelinev1beta1.ConditionStepsReady, metav1.ConditionFalse, "is not written while its DST would name a Service that is not this Pipeline's: create Service") {
		t.Errorf("StepsReady does not say why the step has no Deployment: %s", describeStatus(degraded))
	}
	waitWarning(t, e, p.Name, pipelinev1beta1.ReasonReconcileFailed)

	if err := e.kube.CoreV1().ResourceQuotas(ns).Delete(ctx, quota.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionFalse, "")
	checkChildren(t, e.kube, e.ready(p.Name), ns)
}

// A step pinned to a node that does not exist says so in StepsReady; when
// the (kwok) node appears, the Node event re-reconciles the Pipeline, the
// pods are scheduled there and become Ready.
func TestStepOnMissingNodeIsReportedUntilTheNodeAppears(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	late := "late-node-" + rand.String(5)
	if err := cp.CreateFakeNodes(ctx, "present-node"); err != nil {
		t.Fatal(err)
	}
	s := step("b", "")
	s.Locations = []string{late}
	p := e.create(newPipeline("late", ns, step("a", "present-node"), s))
	e.waitCondition(p.Name, pipelinev1beta1.ConditionStepsReady, metav1.ConditionFalse,
		"step 2 (b): 0/1 replicas ready, pinned to missing node(s) "+late)

	if err := cp.CreateFakeNodes(ctx, late); err != nil {
		t.Fatal(err)
	}
	ready := e.waitCondition(p.Name, pipelinev1beta1.ConditionStepsReady, metav1.ConditionTrue, "All 2 steps")
	if strings.Contains(conditionOf(ready, pipelinev1beta1.ConditionStepsReady).Message, late) {
		t.Errorf("the node is still reported missing: %s", describeStatus(ready))
	}
	checkChildren(t, e.kube, e.ready(p.Name), ns)
	pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "distri-infer.ndsl.cn/step=" + stepName("late", "b")})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != late {
			t.Errorf("pod %s runs on %q, want %s", pod.Name, pod.Spec.NodeName, late)
		}
	}
}
