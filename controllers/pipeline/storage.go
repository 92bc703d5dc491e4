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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// reasonVolumeReleased is the event reason of a stale claimRef cleared.
const reasonVolumeReleased = "VolumeReleased"

// staleClaimRef reports whether pv is still reserved for an earlier claim of
// claim's name: its claimRef names claim but carries another UID, as a
// Retain volume does once the claim it was bound to is deleted (with its
// namespace, say). The binder never binds claim to such a volume.
func staleClaimRef(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.UID != "" && ref.UID != claim.UID &&
		ref.Namespace == claim.Namespace && ref.Name == claim.Name
}

// mountBlocker says why the steps must not mount the claim called name in
// namespace, empty when they may: the claim and the volume it binds to
// must both be the Pipeline's, the claim naming the volume and the volume
// reserved for the claim. Otherwise the pods would mount storage that
// someone else controls: a claim made before the Pipeline, bound to any
// volume, or a volume holding another team's data.
func mountBlocker(p *pipelinev1beta1.Pipeline, namespace, name string, obs observed) string {
	volume, claim := "PersistentVolume "+name, fmt.Sprintf("PersistentVolumeClaim %s/%s", namespace, name)
	var notOwned *controller.NotOwnedError
	switch pv, pvc := obs.volume, obs.claim; {
	case errors.As(obs.volumeErr, &notOwned), errors.As(obs.claimErr, &notOwned):
		return notOwned.Error()
	case pv == nil:
		return absent(volume, obs.volumeErr)
	case !metav1.IsControlledBy(pv, p):
		return volume + " is not controlled by this Pipeline"
	case pvc == nil:
		return absent(claim, obs.claimErr)
	case !metav1.IsControlledBy(pvc, p):
		return claim + " is not controlled by this Pipeline"
	case pvc.Spec.VolumeName != pv.Name:
		return fmt.Sprintf("%s names PersistentVolume %q, not %s", claim, pvc.Spec.VolumeName, pv.Name)
	}
	if ref := obs.volume.Spec.ClaimRef; ref == nil || ref.Namespace != namespace || ref.Name != name || (ref.UID != "" && ref.UID != obs.claim.UID) {
		return fmt.Sprintf("%s is not reserved for %s (uid %s)", volume, claim, obs.claim.UID)
	}
	return ""
}

// releaseStaleClaimRef clears the UID and resourceVersion of the volume's
// claimRef when it is stale, and only then: the volume stays reserved for
// the claim's name, and the binder binds it to the current claim, as it
// would after an admin removed the UID by hand. pv and claim must be the
// Pipeline's own, and claim not being deleted. The patch is valid only for
// the volume's cached resourceVersion: a volume bound since is a conflict,
// retried with what the cache holds then. It returns the volume as it now is.
func (c *Controller) releaseStaleClaimRef(ctx context.Context, p *pipelinev1beta1.Pipeline,
	pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	if claim.DeletionTimestamp != nil || !staleClaimRef(pv, claim) {
		return pv, nil
	}
	stale := pv.Spec.ClaimRef.UID
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": pv.ResourceVersion},
		"spec":     map[string]any{"claimRef": map[string]any{"uid": nil, "resourceVersion": nil}},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the claimRef patch of PersistentVolume %s: %w", pv.Name, err)
	}
	written, err := c.kubeClient.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: controller.FieldManager})
	if err != nil {
		return nil, c.writeFailed(p, "release the stale claimRef of", "PersistentVolume", "", pv.Name, err)
	}
	c.consistency.Wrote(p, c.volumes.Resource, written)
	klog.FromContext(ctx).V(2).Info("Cleared a stale claimRef", "persistentVolume", klog.KObj(pv), "staleUID", stale, "claim", klog.KObj(claim))
	c.recorder.Eventf(p, corev1.EventTypeNormal, reasonVolumeReleased,
		"PersistentVolume %s was still reserved for a deleted claim %s/%s (uid %s); released it for the new claim", pv.Name, claim.Namespace, claim.Name, stale)
	return written, nil
}
