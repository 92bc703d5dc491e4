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
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Deleting a Pipeline's namespace deletes its claim; the Retain volume goes
// Released, still naming the old claim's UID. The claim the controller
// creates again must bind to that volume, which kube-controller-manager's
// binder does only once the stale UID is gone (issue 12, defect 3).
func TestRecreatedClaimBindsToTheRetainedVolume(t *testing.T) {
	ctx := context.Background()
	e := setup(t, nil)
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
