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
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Deleting a Pipeline's namespace deletes its claim; the Retain volume goes
// Released, still naming the old claim's UID. The claim the controller
// creates again must bind to that volume, which kube-controller-manager's
// binder does only once the stale UID is gone (issue 12, defect 3).
func TestRecreatedClaimBindsToTheRetainedVolume(t *testing.T) {
	ctx := context.Background()
	e := setup(t, func(o *options.Options) { o.Pipeline.CreateNamespaces = true })
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "rebind-node"); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("rebind", ns, step("a", "rebind-node")))
	storage := *e.ready(p.Name).Status.Storage
	claims, volumes := e.kube.CoreV1().PersistentVolumeClaims(ns), e.kube.CoreV1().PersistentVolumes()
	old, err := claims.Get(ctx, storage.PVCName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if err := e.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the volume to be Released by the old claim", func(ctx context.Context) (bool, error) {
		pv, err := volumes.Get(ctx, storage.PVName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pv.Status.Phase == corev1.VolumeReleased, nil
	})

	// The controller creates the namespace and the claim again.
	var claimUID types.UID
	framework.Eventually(t, timeout, "the new claim to be bound", func(ctx context.Context) (bool, error) {
		pvc, err := claims.Get(ctx, storage.PVCName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && pvc.UID == old.UID) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		pv, err := volumes.Get(ctx, storage.PVName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		claimUID = pvc.UID
		if pvc.Status.Phase == corev1.ClaimBound {
			return true, nil
		}
		return false, fmt.Errorf("claim %s is %s; volume %s is %s, claimRef uid %s",
			pvc.UID, pvc.Status.Phase, pv.Name, pv.Status.Phase, claimRefUID(pv))
	})
	pv, err := volumes.Get(ctx, storage.PVName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumeBound || claimRefUID(pv) != claimUID {
		t.Errorf("volume %s is %s bound to claim uid %s, want Bound to the new claim %s", pv.Name, pv.Status.Phase, claimRefUID(pv), claimUID)
	}
	e.waitCondition(p.Name, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "")
}

func claimRefUID(pv *corev1.PersistentVolume) types.UID {
	if pv.Spec.ClaimRef == nil {
		return ""
	}
	return pv.Spec.ClaimRef.UID
}

// A claim deleted while the steps' pods use it stays Terminating
// (pvc-protection) until no scheduled pod uses it: that is Kubernetes'
// design, and the controller keeps out of it. It neither deletes the pods
// nor strips the finalizer; it reports the claim as being deleted. Once the
// pods are gone (the user deletes them; their replacements are not scheduled
// while the claim is being deleted), it creates the claim again and the
// Retain volume binds to it (docs/reliability.md, delete-claims).
func TestClaimDeletedUnderRunningStepsComesBackOnceThePodsGo(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	if err := cp.CreateFakeNodes(ctx, "claim-node"); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("claim-in-use", ns, step("a", "claim-node")))
	storage := *e.ready(p.Name).Status.Storage
	claims, pods := e.kube.CoreV1().PersistentVolumeClaims(ns), e.kube.CoreV1().Pods(ns)
	old, err := claims.Get(ctx, storage.PVCName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	using := func(ctx context.Context) ([]corev1.Pod, error) {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []corev1.Pod
		for _, pod := range l.Items {
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == storage.PVCName && pod.Spec.NodeName != "" {
					out = append(out, pod)
				}
			}
		}
		return out, nil
	}
	running, err := using(ctx)
	if err != nil || len(running) == 0 {
		t.Fatalf("no scheduled pod uses claim %s (%v)", storage.PVCName, err)
	}

	if err := claims.Delete(ctx, storage.PVCName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitCondition(p.Name, pipelinev1beta1.ConditionStorageReady, metav1.ConditionFalse, "is being deleted")
	// The controller has seen the claim Terminating and left it and the
	// pods alone.
	pvc, err := claims.Get(ctx, storage.PVCName, metav1.GetOptions{})
	if err != nil || pvc.UID != old.UID || pvc.DeletionTimestamp == nil {
		t.Fatalf("want claim %s (uid %s) Terminating under its pods; got %v, err %v", storage.PVCName, old.UID, pvc, err)
	}
	for _, pod := range running {
		now, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || now.UID != pod.UID || now.DeletionTimestamp != nil {
			t.Errorf("pod %s was deleted while its claim was Terminating (err %v); only the user deletes it", pod.Name, err)
		}
	}

	// The user deletes the pods that keep the claim.
	framework.Eventually(t, timeout, "the old claim to be gone once its pods are", func(ctx context.Context) (bool, error) {
		pvc, err := claims.Get(ctx, storage.PVCName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && pvc.UID != old.UID) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		scheduled, err := using(ctx)
		if err != nil {
			return false, err
		}
		for _, pod := range scheduled {
			if pod.DeletionTimestamp == nil {
				if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return false, err
				}
			}
		}
		return false, fmt.Errorf("claim %s still there, %d scheduled pods use it", old.UID, len(scheduled))
	})
	got := e.ready(p.Name)
	pvc, err = claims.Get(ctx, storage.PVCName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.UID == old.UID || pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim %s is %s with uid %s, want a new claim Bound (old uid %s); status %s", pvc.Name, pvc.Status.Phase, pvc.UID, old.UID, describeStatus(got))
	}
}
