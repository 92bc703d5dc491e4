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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Issue 35: a step mounts only storage its own Pipeline controls.

// Another team's claim on the storage name (created before the Pipeline, as
// anyone who may create claims in the namespace can) blocks every step:
// no Deployment is written to mount it, status names the blocker, and the
// Pipeline converges once it goes.
func TestForeignClaimBlocksTheSteps(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "foreign-claim-node"); err != nil {
		t.Fatal(err)
	}
	p := newPipeline("foreign-claim", ns, step("a", "foreign-claim-node"), step("b", "foreign-claim-node"))
	_, claim, _, _ := desiredChildren(p, ns)
	_, err := e.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Labels: map[string]string{"team": "other"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To("other-team"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	p = e.create(p)
	blocker := "PersistentVolumeClaim " + ns + "/" + claim.Name + " exists and is not ours"
	degraded := e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, blocker)
	steps := conditionOf(degraded, pipelinev1beta1.ConditionStepsReady).Message
	if !strings.Contains(steps, "is not written while the storage it would mount is not this Pipeline's: "+blocker) {
		t.Errorf("StepsReady does not name the storage blocker: %s", describeStatus(degraded))
	}
	deployments, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments.Items {
		t.Errorf("Deployment %s was written; it mounts %v", d.Name, d.Spec.Template.Spec.Volumes)
	}

	if err := e.kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "Ready once the foreign claim is gone", func(ctx context.Context) (bool, error) {
		p, err := e.crd.PipelineV1beta1().Pipelines().Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if hasCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "") {
			return true, nil
		}
		return false, fmt.Errorf("%s", describeStatus(p))
	})
	checkChildren(t, e.kube, e.get(p.Name), ns)
}

// Another team's claim on the storage name that the Pipeline's volume would
// fit (no storage class, a size and access mode the volume satisfies) gets
// no volume of the Pipeline's: none is written while a claim the Pipeline
// does not control holds the name, and the volume written once it goes is
// reserved for the Pipeline's own claim by UID.
func TestForeignClaimGetsNoVolume(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "claim-squat-node"); err != nil {
		t.Fatal(err)
	}
	p := newPipeline("claim-squat", ns, step("a", "claim-squat-node"))
	_, claim, _, _ := desiredChildren(p, ns)
	foreign, err := e.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Labels: map[string]string{"team": "other"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To(""),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every version of every volume, from before the Pipeline exists.
	w, err := e.kube.CoreV1().PersistentVolumes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var boundToForeign []string
	go func() {
		for ev := range w.ResultChan() {
			if pv, ok := ev.Object.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == foreign.UID {
				mu.Lock()
				boundToForeign = append(boundToForeign, fmt.Sprintf("%s (controller %v, phase %s)", pv.Name, metav1.GetControllerOf(pv), pv.Status.Phase))
				mu.Unlock()
			}
		}
	}()
	violations := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(boundToForeign)
	}

	p = e.create(p)
	e.waitCondition(p.Name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue,
		"PersistentVolumeClaim "+ns+"/"+claim.Name+" exists and is not ours")
	// The PV binder binds a claim when it syncs it (on a change, or its
	// periodic resync): once it has synced the foreign claim again since,
	// it has judged every volume the Pipeline wrote until then.
	synced := failedBindings(ctx, t, e, foreign)
	framework.Eventually(t, timeout, "the PV binder to sync the foreign claim again", func(ctx context.Context) (bool, error) {
		if len(violations()) > 0 {
			return true, nil
		}
		n, err := failedBindingCount(ctx, e, foreign)
		return n > synced, err
	})
	if v := violations(); len(v) > 0 {
		t.Fatalf("a volume was bound to the other team's claim %s/%s: %v", ns, foreign.Name, v)
	}
	volumes, err := e.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range volumes.Items {
		if metav1.IsControlledBy(&pv, p) {
			t.Errorf("PersistentVolume %s was written while the claim of its name is not the Pipeline's (claimRef %+v)", pv.Name, pv.Spec.ClaimRef)
		}
	}

	if err := e.kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, foreign.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	converged := e.ready(p.Name)
	checkChildren(t, e.kube, converged, ns)
	if v := violations(); len(v) > 0 {
		t.Errorf("a volume was bound to the other team's claim %s/%s: %v", ns, foreign.Name, v)
	}
}

// failedBindingCount is how often the PV binder found no volume for claim:
// each sync of a claim with no storage class and no volume to bind says so
// in an Event (aggregated: its count grows).
func failedBindingCount(ctx context.Context, e *env, claim *corev1.PersistentVolumeClaim) (int32, error) {
	events, err := e.kube.CoreV1().Events(claim.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.uid=" + string(claim.UID) + ",reason=FailedBinding",
	})
	if err != nil {
		return 0, err
	}
	var n int32
	for _, ev := range events.Items {
		n += max(ev.Count, 1)
	}
	return n, nil
}

func failedBindings(ctx context.Context, t *testing.T, e *env, claim *corev1.PersistentVolumeClaim) int32 {
	t.Helper()
	n, err := failedBindingCount(ctx, e, claim)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// shortStorageName is the storage name the manager gave before issue 35:
// 32 bits of hash.
func shortStorageName(p *pipelinev1beta1.Pipeline, namespace string) string {
	ms := &p.Spec.ModelStorage
	base := p.Name + "-models"
	salt := strings.Join([]string{namespace, string(ms.EffectiveType()), ms.NFSServer(), ms.NFSShare(), "10Gi"}, "\x00")
	sum := sha256.Sum256([]byte(base + "\x00" + salt))
	return base + "-" + hex.EncodeToString(sum[:])[:8]
}

// preIssue35Children are the children the manager wrote before issue 35:
// storage named with a 32-bit hash and one volume handle per Pipeline, pods
// labelled with the Pipeline's name and the model, the image as written.
func preIssue35Children(p *pipelinev1beta1.Pipeline, namespace string) []any {
	pv, pvc, deployments, services := desiredChildren(p, namespace)
	ownedAtV1beta1(pv, pvc)
	name := shortStorageName(p, namespace)
	ms := &p.Spec.ModelStorage
	pv.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"}
	pv.Name, pv.Spec.ClaimRef.Name = name, name
	pv.Spec.CSI.VolumeHandle = strings.Join([]string{ms.NFSServer(), ms.NFSShare(), p.Name}, "#")
	pvc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
	pvc.Name, pvc.Spec.VolumeName = name, name
	objs := []any{pv, pvc}
	for i, d := range deployments {
		d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		ownedAtV1beta1(d, services[i])
		for _, l := range []map[string]string{d.Labels, d.Spec.Template.Labels} {
			l["pipeline"], l["app.kubernetes.io/name"] = p.Name, p.Spec.Steps[i].Model
		}
		d.Spec.Template.Annotations = nil
		d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = name
		d.Spec.Template.Spec.Containers[0].Image = p.Spec.Steps[i].Image
		svc := services[i]
		svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		svc.Labels["app.kubernetes.io/name"] = p.Spec.Steps[i].Model
		objs = append(objs, d, svc)
	}
	return objs
}

// availability records, per Deployment, whether its available replicas
// ever fell below what it asks for once it had them.
type availability struct {
	mu      sync.Mutex
	serving map[string]bool
	dropped []string
}

func (a *availability) record(ev apiwatch.Event) {
	d, ok := ev.Object.(*appsv1.Deployment)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if d.Status.AvailableReplicas >= ptr.Deref(d.Spec.Replicas, 1) {
		a.serving[d.Name] = true
	} else if a.serving[d.Name] {
		a.dropped = append(a.dropped, fmt.Sprintf("%s at generation %d: %d/%d available", d.Name, d.Generation, d.Status.AvailableReplicas, ptr.Deref(d.Spec.Replicas, 1)))
		a.serving[d.Name] = false
	}
}

// Children written before issue 35 move to the new storage names make
// before break: the steps roll once (one new generation each) to the new
// claim, with every replica available throughout, and the old volume and
// claim go only once the steps are available on the new one.
func TestPreIssue35ChildrenMoveToLongStorageNamesWithoutDowntime(t *testing.T) {
	ctx := context.Background()
	if crdErr != nil {
		t.Fatalf("installing the CRDs: %v", crdErr)
	}
	crd, err := newCRDClient()
	if err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, cp.Client)
	if err := cp.CreateFakeNodes(ctx, "upgrade-node"); err != nil {
		t.Fatal(err)
	}
	p, err := crd.PipelineV1beta1().Pipelines().Create(ctx,
		newPipeline("upgrade", ns, step("a", "upgrade-node"), step("b", "upgrade-node")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pre := &env{t: t, kube: cp.Client, crd: crd}
	t.Cleanup(func() { pre.deletePipeline(p.Name, true) })
	oldStorage := shortStorageName(p, ns)
	for _, obj := range preIssue35Children(p, ns) {
		if err := applyAsOldManager(ctx, pre, obj); err != nil {
			t.Fatalf("creating %T as the manager before issue 35 did: %v", obj, err)
		}
	}
	generations := map[string]int64{}
	framework.Eventually(t, timeout, "the old Deployments to be rolled out", func(ctx context.Context) (bool, error) {
		for _, s := range p.Spec.Steps {
			d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, stepName(p.Name, s.Model), metav1.GetOptions{})
			if err != nil || !rolledOut(d) {
				return false, err
			}
			generations[d.Name] = d.Generation
		}
		return true, nil
	})

	w, err := cp.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	a := &availability{serving: map[string]bool{}}
	for name := range generations {
		a.serving[name] = true
	}
	go func() {
		for ev := range w.ResultChan() {
			a.record(ev)
		}
	}()

	e := setup(t, nil)
	waitGone(t, "old claim "+oldStorage, func(ctx context.Context) error {
		_, err := e.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, oldStorage, metav1.GetOptions{})
		return err
	})
	waitGone(t, "old volume "+oldStorage, func(ctx context.Context) error {
		_, err := e.kube.CoreV1().PersistentVolumes().Get(ctx, oldStorage, metav1.GetOptions{})
		return err
	})
	converged := e.ready(p.Name)
	if converged.Status.Storage.PVCName == oldStorage {
		t.Fatalf("the storage keeps its old name %s", oldStorage)
	}
	checkChildren(t, e.kube, converged, ns)
	for name, gen := range generations {
		d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != gen+1 {
			t.Errorf("Deployment %s went from generation %d to %d, want one rollout", name, gen, d.Generation)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.dropped) > 0 {
		t.Errorf("steps stopped serving during the move: %v", a.dropped)
	}
}
