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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A Pipeline aimed at a namespace outside --pipeline-allowed-namespaces
// (kube-system) gets nothing created, not even its cluster-scoped volume,
// and says why in Degraded and a Warning event; one aimed at an allowed
// namespace gets its children (issue 12, defect 8).
func TestNamespaceOutsideTheAllowList(t *testing.T) {
	const allowed = "allow-list-ok"
	e := setup(t, func(o *options.Options) { o.Pipeline.AllowedNamespaces = []string{allowed} })
	ctx := context.Background()
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: allowed}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), allowed, metav1.DeleteOptions{}) })

	refused := e.create(newPipeline("deputy", metav1.NamespaceSystem, step("a", "deputy-node")))
	e.create(newPipeline("permitted", allowed, step("a", "deputy-node")))

	p := e.waitCondition(refused.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "kube-system is not allowed")
	if c := conditionOf(p, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonNamespaceNotAllowed {
		t.Errorf("Degraded reason = %q, want %q", c.Reason, pipelinev1beta1.ReasonNamespaceNotAllowed)
	}
	if c := conditionOf(p, pipelinev1beta1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %s, want False", c.Status)
	}
	waitWarning(t, e, refused.Name, pipelinev1beta1.ReasonNamespaceNotAllowed)
	// The allowed Pipeline's Deployment shows the controller is at work, so
	// the absence below is not just slowness.
	e.waitDeployments("permitted", stepName("permitted", "a"))

	selector := labels.SelectorFromSet(labels.Set{pipeline.LabelPipeline: refused.Name}).String()
	opts := metav1.ListOptions{LabelSelector: selector}
	deployments, err := e.kube.AppsV1().Deployments("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	services, err := e.kube.CoreV1().Services("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := e.kube.CoreV1().PersistentVolumeClaims("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	volumes, err := e.kube.CoreV1().PersistentVolumes().List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(deployments.Items) + len(services.Items) + len(claims.Items) + len(volumes.Items); n != 0 {
		t.Errorf("Pipeline aimed at kube-system got %d Deployments, %d Services, %d claims, %d volumes; want none",
			len(deployments.Items), len(services.Items), len(claims.Items), len(volumes.Items))
	}
	// Refusing is not a failure to retry: the warning was sent once, while
	// the allowed Pipeline converged.
	events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + refused.Name + ",reason=" + pipelinev1beta1.ReasonNamespaceNotAllowed + ",type=" + corev1.EventTypeWarning})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 || events.Items[0].Count != 1 {
		t.Errorf("%d NamespaceNotAllowed events (first counted %d times), want one, once", len(events.Items), firstCount(events.Items))
	}
}

func firstCount(events []corev1.Event) int32 {
	if len(events) == 0 {
		return 0
	}
	return events[0].Count
}

// A Pipeline whose namespace is terminating is retried until its budget is
// spent and its key dropped; the namespace going away later must still
// bring it its children at once, not at the next resync (issue 12, defect 2).
func TestTerminatingNamespaceUnblocksAfterTheRetryBudget(t *testing.T) {
	e := setup(t, func(o *options.Options) {
		o.Pipeline.MaxRetries = 2
		o.Pipeline.CreateNamespaces = true // its children follow the namespace's deletion
	})
	ctx := context.Background()
	const ns, hold = "blocked-ns", "test.ndsl.cn/hold"
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns, Finalizers: []string{hold}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("blocked", ns, step("a", "blocked-node")))

	framework.Eventually(t, timeout, "the controller to give up on Pipeline blocked", func(ctx context.Context) (bool, error) {
		events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + p.Name + ",type=" + corev1.EventTypeWarning})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if strings.Contains(ev.Message, "Giving up") {
				return true, nil
			}
		}
		return false, nil
	})
	// Lift the blocker: the namespace controller then finishes deleting it.
	framework.Eventually(t, timeout, "removing the finalizer of namespace "+ns, func(ctx context.Context) (bool, error) {
		n, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Finalizers = nil
		_, err = e.kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, err
	})
	e.waitDeployments(p.Name, stepName(p.Name, "a"))
}
