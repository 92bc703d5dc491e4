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
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Issue 21: Pipelines in a cluster shared with other Pipelines, Helm
// releases, Argo CD and other field managers.

// Pipeline a-b with model c and Pipeline a with model b-c both made a-b-c
// when names were <pipeline>-<model>: one got nothing, and the other's last
// step sent its traffic to the winner's Service. Both converge now, and
// every DST names a Service of its own Pipeline.
func TestConcatenatedNamesDoNotCollide(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "collide-node"); err != nil {
		t.Fatal(err)
	}
	p1 := e.create(newPipeline("collide-a-b", ns, step("c", "collide-node"), step("x", "collide-node")))
	p2 := e.create(newPipeline("collide-a", ns, step("b-c", "collide-node"), step("y", "collide-node")))
	ready1, ready2 := e.ready(p1.Name), e.ready(p2.Name)
	if a, b := ready1.Status.Steps[0].ServiceName, ready2.Status.Steps[0].ServiceName; a == b {
		t.Errorf("both Pipelines name their step Service %s", a)
	}
	for _, p := range []*pipelinev1beta1.Pipeline{ready1, ready2} {
		checkChildren(t, e.kube, p, ns)
		for _, st := range p.Status.Steps {
			d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, st.DeploymentName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			svc, err := e.kube.CoreV1().Services(ns).Get(ctx, dstService(d), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the Service DST of Deployment %s names: %v", d.Name, err)
			}
			ownedBy(t, svc, p)
		}
	}
}

// dstService is the name of the Service a step Deployment's DST names.
func dstService(d *appsv1.Deployment) string {
	for _, env := range d.Spec.Template.Spec.Containers[0].Env {
		if env.Name == pipeline.EnvDST {
			return strings.SplitN(env.Value, ".", 2)[0]
		}
	}
	return ""
}

// A Helm release named like a step (app.kubernetes.io/instance, Helm's
// release label and Argo CD's tracking label) puts no pod behind a step's
// Service or under its Deployment: no selector of a Pipeline child matches
// its pods, and no child carries app.kubernetes.io/instance.
func TestStepSelectorsIgnoreHelmReleasePods(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "helm-node"); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("helmlike", ns, step("a", "helm-node"), step("b", "helm-node")))
	p = e.ready(p.Name)

	var foreign []*corev1.Pod
	for i, st := range p.Status.Steps {
		// A release named like the child as it is named now, and as
		// 08da2b9 named it.
		for j, release := range []string{st.DeploymentName, p.Name + "-" + st.Model} {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("release-%d-%d", i, j), Labels: map[string]string{
					"app.kubernetes.io/instance":   release,
					"app.kubernetes.io/name":       st.Model,
					"app.kubernetes.io/managed-by": "Helm",
					"helm.sh/chart":                st.Model + "-1.0.0",
					"pipeline":                     p.Name, // a label called pipeline is common enough
				}},
				Spec: corev1.PodSpec{NodeName: "helm-node", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}
			created, err := e.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			foreign = append(foreign, created)
		}
	}
	for _, st := range p.Status.Steps {
		d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, st.DeploymentName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := e.kube.CoreV1().Services(ns).Get(ctx, st.ServiceName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deploymentSelector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, pod := range foreign {
			if deploymentSelector.Matches(labels.Set(pod.Labels)) {
				t.Errorf("Deployment %s selector %s matches the Helm release's pod %s %v", d.Name, deploymentSelector, pod.Name, pod.Labels)
			}
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				t.Errorf("Service %s selector %v matches the Helm release's pod %s %v", svc.Name, svc.Spec.Selector, pod.Name, pod.Labels)
			}
		}
		for what, l := range map[string]map[string]string{
			"Deployment " + d.Name: d.Labels, "the pods of " + d.Name: d.Spec.Template.Labels, "Service " + svc.Name: svc.Labels,
		} {
			if v, ok := l["app.kubernetes.io/instance"]; ok {
				t.Errorf("%s carries app.kubernetes.io/instance=%s", what, v)
			}
		}
	}
}

// oldChildren are the children 08da2b9 (names <pipeline>-<model>, selectors
// on app.kubernetes.io/instance) made for p in namespace, built from what is
// desired now and reshaped: storage names did not change.
func oldChildren(p *pipelinev1beta1.Pipeline, namespace string) []any {
	pv, pvc, deployments, services := desiredChildren(p, namespace)
	ownedAtV1beta1(pv, pvc)
	oldName := func(i int) string { return p.Name + "-" + p.Spec.Steps[i%len(p.Spec.Steps)].Model }
	objs := []any{}
	for _, storage := range []metav1.Object{pv, pvc} {
		storage.SetLabels(map[string]string{
			"pipeline": p.Name, "app.kubernetes.io/name": "model-storage",
			"app.kubernetes.io/instance": storage.GetName(), controller.ManagedByLabel: controller.ManagedByValue,
		})
	}
	pv.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"}
	pvc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
	objs = append(objs, pv, pvc)
	for i, d := range deployments {
		name := oldName(i)
		l := map[string]string{
			"pipeline": p.Name, "step": strconv.Itoa(i + 1), "app.kubernetes.io/name": p.Spec.Steps[i].Model,
			"app.kubernetes.io/instance": name, controller.ManagedByLabel: controller.ManagedByValue,
		}
		d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		ownedAtV1beta1(d, services[i])
		d.Name, d.Labels, d.Spec.Template.Labels = name, l, l
		d.Spec.Replicas = ptr.To[int32](1)
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"pipeline": p.Name, "app.kubernetes.io/instance": name}}
		env := d.Spec.Template.Spec.Containers[0].Env
		for j := range env {
			if env[j].Name == pipeline.EnvDST {
				env[j].Value = fmt.Sprintf("%s.%s.svc:%d", oldName(i+1), namespace, p.Spec.ListenPort)
			}
		}
		svc := services[i]
		svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		svc.Name, svc.Labels = name, l
		svc.Spec.Selector = d.Spec.Selector.MatchLabels
		objs = append(objs, d, svc)
	}
	return objs
}

// applyAsOldManager writes obj as 08da2b9's manager did: a forced
// server-side apply under the manager's field manager.
func applyAsOldManager(ctx context.Context, e *env, obj any) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: controller.FieldManager, Force: ptr.To(true)}
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		_, err = e.kube.CoreV1().PersistentVolumes().Patch(ctx, o.Name, types.ApplyPatchType, body, opts)
	case *corev1.PersistentVolumeClaim:
		_, err = e.kube.CoreV1().PersistentVolumeClaims(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, body, opts)
	case *appsv1.Deployment:
		_, err = e.kube.AppsV1().Deployments(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, body, opts)
	case *corev1.Service:
		_, err = e.kube.CoreV1().Services(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, body, opts)
	default:
		err = fmt.Errorf("unexpected %T", obj)
	}
	return err
}

// deploymentAvailable: every replica the Deployment asks for is available.
func deploymentAvailable(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= ptr.Deref(d.Spec.Replicas, 1)
}

// rolledOut: the Deployment controller is done with the Deployment, which
// is available.
func rolledOut(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "NewReplicaSetAvailable" {
			return deploymentAvailable(d)
		}
	}
	return false
}

// deploymentLog records a namespace's Deployment events in order and, at the
// first delete of an old Deployment, which new ones were not available yet.
type deploymentLog struct {
	mu            sync.Mutex
	last          map[string]*appsv1.Deployment
	deletedBefore []string // new Deployments not available when the first old one went
	firstDelete   string
}

func (l *deploymentLog) record(ev apiwatch.Event, old, new []string) {
	d, ok := ev.Object.(*appsv1.Deployment)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.Type != apiwatch.Deleted && d.DeletionTimestamp == nil {
		l.last[d.Name] = d
		return
	}
	if l.firstDelete != "" || !slices.Contains(old, d.Name) {
		return
	}
	l.firstDelete = d.Name
	for _, n := range new {
		if have := l.last[n]; have == nil || !deploymentAvailable(have) {
			l.deletedBefore = append(l.deletedBefore, n)
		}
	}
}

// Children made by 08da2b9 (old names, old labels and selectors) migrate
// with no one deleting anything by hand: the new-named children are created
// and the old ones deleted only once every new Deployment has its replicas
// available (kube-controller-manager, scheduler and kwok run them), so the
// steps keep serving throughout.
func TestOldChildrenMigrateWithoutDowntime(t *testing.T) {
	ctx := context.Background()
	if crdErr != nil {
		t.Fatalf("installing the CRDs: %v", crdErr)
	}
	crd, err := newCRDClient()
	if err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, cp.Client)
	if err := cp.CreateFakeNodes(ctx, "migrate-node"); err != nil {
		t.Fatal(err)
	}
	// The Pipeline and its children as the old manager left them; no
	// manager runs yet.
	p, err := crd.PipelineV1beta1().Pipelines().Create(ctx,
		newPipeline("migrate", ns, step("a", "migrate-node"), step("b", "migrate-node")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pre := &env{t: t, kube: cp.Client, crd: crd}
	t.Cleanup(func() { pre.deletePipeline(p.Name, true) })
	var oldDeployments, oldServices, newDeployments []string
	for _, obj := range oldChildren(p, ns) {
		if err := applyAsOldManager(ctx, pre, obj); err != nil {
			t.Fatalf("creating %T as 08da2b9 did: %v", obj, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			oldDeployments = append(oldDeployments, o.Name)
		case *corev1.Service:
			oldServices = append(oldServices, o.Name)
		}
	}
	for _, s := range p.Spec.Steps {
		newDeployments = append(newDeployments, pipeline.StepName(p.Name, s.Model))
	}
	framework.Eventually(t, timeout, "the old Deployments to be available", func(ctx context.Context) (bool, error) {
		for _, name := range oldDeployments {
			d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || !deploymentAvailable(d) {
				return false, err
			}
		}
		return true, nil
	})

	w, err := cp.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	log := &deploymentLog{last: map[string]*appsv1.Deployment{}}
	go func() {
		for ev := range w.ResultChan() {
			log.record(ev, oldDeployments, newDeployments)
		}
	}()

	e := setup(t, nil)
	for _, name := range oldDeployments {
		waitGone(t, "old Deployment "+name, func(ctx context.Context) error {
			_, err := e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	for _, name := range oldServices {
		waitGone(t, "old Service "+name, func(ctx context.Context) error {
			_, err := e.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	e.waitDeployments(p.Name, newDeployments...)
	checkChildren(t, e.kube, e.ready(p.Name), ns)
	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("first old Deployment deleted: %s", log.firstDelete)
	if len(log.deletedBefore) > 0 {
		t.Errorf("old Deployment %s was deleted before the new %v were available", log.firstDelete, log.deletedBefore)
	}
}

// unblockedWithin bounds how long a Pipeline takes to converge once its
// blocker is gone: an event's worth, far below any resync.
const unblockedWithin = 20 * time.Second

// A Service of someone else's on a step's name blocks that step's Service
// and the Deployment of the step before, whose DST would name it: status
// names the blocker and its controller, no Deployment of ours sends to it,
// and deleting it converges the Pipeline at once, even after the retry
// budget is spent and the key dropped.
func TestBlockedStepNamesItsBlockerAndConvergesWhenItGoes(t *testing.T) {
	ctx := context.Background()
	e := setup(t, func(o *options.Options) { o.Pipeline.MaxRetries = 2 })
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "guarded-node"); err != nil {
		t.Fatal(err)
	}
	const name = "guarded"
	blocked := pipeline.StepName(name, "b")
	owner, err := e.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other-team"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: blocked, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"team": "other"}, Ports: []corev1.ServicePort{{Port: 9080}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	p := e.create(newPipeline(name, ns, step("a", "guarded-node"), step("b", "guarded-node")))
	blocker := "Service " + ns + "/" + blocked + " exists and is not ours (it has controller ConfigMap other-team)"
	degraded := e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, blocker)
	deployments, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments.Items {
		if dstService(&d) == blocked {
			t.Errorf("Deployment %s sends to the blocker: DST names Service %s", d.Name, blocked)
		}
	}
	if !hasCondition(degraded, pipelinev1beta1.ConditionStepsReady, metav1.ConditionFalse, "step 1 (a)") ||
		!strings.Contains(conditionOf(degraded, pipelinev1beta1.ConditionStepsReady).Message,
			"is not written while its DST would name a Service that is not this Pipeline's: "+blocker) {
		t.Errorf("StepsReady does not say why step 1 has no Deployment: %s", describeStatus(degraded))
	}

	framework.Eventually(t, timeout, "the controller to give up on Pipeline "+name, func(ctx context.Context) (bool, error) {
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
	// Nothing else left to bring the Pipeline back: its storage bound and
	// its pods ready as its status says, its key given up and out of the
	// queue.
	framework.Eventually(t, timeout, "the Deployments' rollouts to be complete", func(ctx context.Context) (bool, error) {
		list, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		for _, d := range list.Items {
			if !rolledOut(&d) {
				return false, fmt.Errorf("Deployment %s: %+v", d.Name, d.Status)
			}
		}
		return true, nil
	})
	e.waitFor(p.Name, "everything but the blocked step settled", func(p *pipelinev1beta1.Pipeline) bool {
		return hasCondition(p, pipelinev1beta1.ConditionStorageReady, metav1.ConditionTrue, "") &&
			!strings.Contains(conditionOf(p, pipelinev1beta1.ConditionStepsReady).Message, "replicas ready")
	})
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) { return e.m.QueuesEmpty() })
	if err := e.kube.CoreV1().Services(ns).Delete(ctx, blocked, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, unblockedWithin, "Ready once the blocker is gone", func(ctx context.Context) (bool, error) {
		p, err := e.crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if hasCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "") {
			return true, nil
		}
		return false, fmt.Errorf("%s", describeStatus(p))
	})
	checkChildren(t, e.kube, e.get(name), ns)
}

// A step without replicas leaves its Deployment's replicas to others (an
// HPA, kubectl scale): scaled through the scale subresource, it stays
// scaled across reconciles, which write nothing to it, and the step's status
// reports the replicas it has.
func TestUnsetStepReplicasAreLeftToOtherManagers(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "scaled-node"); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("scaled", ns, step("a", "scaled-node"), step("b", "scaled-node")))
	if r := p.Spec.Steps[0].Replicas; r != nil {
		t.Errorf("the API server defaulted step replicas to %d", *r)
	}
	p = e.ready(p.Name)
	name := p.Status.Steps[0].DeploymentName
	deployments := e.kube.AppsV1().Deployments(ns)

	scale, err := deployments.GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 3
	if _, err := deployments.UpdateScale(ctx, name, scale, metav1.UpdateOptions{FieldManager: "hpa-stand-in"}); err != nil {
		t.Fatal(err)
	}
	writesTo := func() int {
		n := 0
		for request, count := range e.m.Writes.ByRequest() {
			if strings.HasSuffix(request, "/namespaces/"+ns+"/deployments/"+name) {
				n += count
			}
		}
		return n
	}
	before := writesTo()
	e.waitFor(p.Name, "step a reporting 3 replicas, all ready", func(p *pipelinev1beta1.Pipeline) bool {
		return p.Status.Steps[0].Replicas == 3 && p.Status.Steps[0].ReadyReplicas == 3 &&
			hasCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "")
	})

	// A spec change elsewhere in the Pipeline: a reconcile that writes step b.
	updated := e.update(p.Name, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[1].Args = map[string]string{"touched": "1"} })
	e.waitFor(p.Name, "the touched spec observed and Ready", func(p *pipelinev1beta1.Pipeline) bool {
		return p.Status.ObservedGeneration == updated.Generation && hasCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "")
	})
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) { return e.m.QueuesEmpty() })
	d, err := deployments.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(d.Spec.Replicas, -1); got != 3 {
		t.Errorf("Deployment %s has %d replicas after the reconciles, want the 3 it was scaled to", name, got)
	}
	if n := writesTo() - before; n != 0 {
		t.Errorf("%d writes to Deployment %s after it was scaled:\n%s", n, name, e.m.Writes.Summary())
	}
	for _, mf := range d.ManagedFields {
		if mf.Manager == controller.FieldManager && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:replicas"`) {
			t.Errorf("the controller owns spec.replicas of %s: %s", name, mf.FieldsV1.Raw)
		}
	}
}
