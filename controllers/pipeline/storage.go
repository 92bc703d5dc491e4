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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// mountBlocker says why the steps must not mount the claim called name in
// namespace, empty when they may: the claim and the volume it binds to
// must both be the Pipeline's, the claim naming the volume and the volume
// reserved for the claim. Otherwise the pods would mount storage that
// someone else controls: a claim made before the Pipeline, bound to any
// volume, or a volume holding another team's data.
func mountBlocker(p *pipelinev1.Pipeline, namespace, name string, obs observed) string {
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
	if ref := obs.volume.Spec.ClaimRef; ref == nil || ref.Namespace != namespace || ref.Name != name || ref.UID != obs.claim.UID {
		return fmt.Sprintf("%s is not reserved for %s (uid %s)", volume, claim, obs.claim.UID)
	}
	return ""
}

// cachedVolume is the cached PersistentVolume name when the Pipeline
// controls it, nil when the cache has none, and a NotOwnedError for one it
// does not control. A volume of that name the cache does not hold (not
// labelled) shows when the Pipeline's is created: that create fails.
func (c *Controller) cachedVolume(p *pipelinev1.Pipeline, name string) (*corev1.PersistentVolume, error) {
	pv, found, err := c.volumes.Get("", name)
	switch {
	case err != nil || !found:
		return nil, err
	case !metav1.IsControlledBy(pv, p):
		return nil, controller.NewNotOwnedError(c.volumes.Kind, pv)
	}
	return pv, nil
}
