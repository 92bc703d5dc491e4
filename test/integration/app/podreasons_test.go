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

package app

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
)

// The pods the deployment controller makes for an App are found (by the
// App's labels and the ReplicaSet's name), and the Ready condition names
// why they are unavailable: here an image that cannot be pulled, with the
// kubelet played by UpdateStatus. The manager runs with nothing but the
// shipped ClusterRole, so that role lets it watch the pods.
func TestReadyNamesWhyPodsAreUnavailable(t *testing.T) {
	e := setup(t, serviceAccountWithAppRole(t))
	ctx := context.Background()
	const (
		name  = "nopull"
		image = "registry.invalid/nope:latest"
	)
	app := newApp(name, false, false)
	app.Spec.Image = image
	app.Spec.Replicas = ptr.To[int32](3)
	e.create(app)

	pods := e.kube.CoreV1().Pods(e.ns)
	selector := labels.SelectorFromSet(labels.Set{appcontroller.AppLabel: name}).String()
	var names []string
	e.waitApp(name, "3 pods from the deployment controller", func(*appv1beta1.App) bool {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(list.Items) != 3 {
			return false
		}
		names = names[:0]
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return true
	})
	e.waitApp(name, "Ready=False without a reason from the pods", func(a *appv1beta1.App) bool {
		ready := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionReady)
		return ready != nil && ready.Message == "0 of 3 replicas available"
	})

	for _, pod := range names {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := pods.Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: appcontroller.ContainerName, Image: image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "ImagePullBackOff", Message: fmt.Sprintf("Back-off pulling image %q", image)}},
			}}
			_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf(`0 of 3 replicas available: ImagePullBackOff for image %q (3 pods)`, image)
	got := e.waitApp(name, "Ready to name the image pull error", func(a *appv1beta1.App) bool {
		ready := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionReady)
		return ready != nil && ready.Message == want
	})
	ready := meta.FindStatusCondition(got.Status.Conditions, appv1beta1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != appv1beta1.ReasonReplicasUnavailable {
		t.Errorf("Ready = %s %s, want False %s", ready.Status, ready.Reason, appv1beta1.ReasonReplicasUnavailable)
	}
}
