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

package writes

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The Ready condition says why the pods are unavailable, and says it in the
// same words for as long as the problem lasts: kubelet retries that only
// flip ErrImagePull and ImagePullBackOff, or change messages and restart
// counts, reconcile the App without writing its status. Without
// kube-controller-manager there is no ReplicaSet: the test makes the pods
// it would make, owned by the ReplicaSet name it would use, and plays the
// kubelet with UpdateStatus.
func TestPodProblemsInReadyWithoutStatusWrites(t *testing.T) {
	const (
		name     = "pull"
		image    = "registry.invalid/nope:latest"
		hash     = "6f9c8d7b5"
		replicas = 3
	)
	ctx := context.Background()
	ns, apps, m := startAppManager(t, nil)

	if _, err := apps.Create(ctx, &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1beta1.AppSpec{Image: image, Replicas: ptr.To[int32](replicas)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Deployment", func(ctx context.Context) (bool, error) {
		_, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})

	pods := cp.Client.CoreV1().Pods(ns)
	var podNames []string
	for i := range replicas {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%s-%d", name, hash, i),
				Labels: map[string]string{
					appcontroller.NameLabel: name, appcontroller.AppLabel: name,
					controller.ManagedByLabel:              controller.ManagedByValue,
					appsv1.DefaultDeploymentUniqueLabelKey: hash,
				},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
					Name: name + "-" + hash, UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: appcontroller.ContainerName, Image: image}}},
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		podNames = append(podNames, pod.Name)
	}
	// setWaiting plays the kubelet: pod i's container waits for reason,
	// with a message and a restart count that change on every retry.
	retries := 0
	setWaiting := func(i int, reason string) {
		t.Helper()
		retries++
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pod, err := pods.Get(ctx, podNames[i], metav1.GetOptions{})
			if err != nil {
				return err
			}
			pod.Status.Phase = corev1.PodPending
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
				Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(time.Now().Add(time.Duration(retries) * time.Second))}}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: appcontroller.ContainerName, Image: image, RestartCount: int32(retries),
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason,
					Message: fmt.Sprintf("Back-off pulling image %q (retry %d)", image, retries)}},
			}}
			_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range replicas {
		setWaiting(i, "ErrImagePull")
	}

	want := fmt.Sprintf(`0 of %d replicas available: ImagePullBackOff for image %q (%d pods)`, replicas, image, replicas)
	waitReady := func(what, message string) {
		t.Helper()
		framework.Eventually(t, timeout, what, func(ctx context.Context) (bool, error) {
			app, err := apps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ready := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionReady)
			return ready != nil && ready.Status == metav1.ConditionFalse &&
				ready.Reason == appv1beta1.ReasonReplicasUnavailable && ready.Message == message, nil
		})
	}
	waitReady("Ready to name the image pull error", want)
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) {
		return m.QueuesEmpty()
	})

	// Rounds of kubelet retries: each flips every pod's reason, which the
	// cached pod keeps, so the App is reconciled; the message stays.
	writesBefore, reconcilesBefore := m.Writes.Total(), framework.ReconcileCount(t, appcontroller.ControllerName)
	const rounds = 4
	for round := range rounds {
		reason := "ImagePullBackOff"
		if round%2 == 1 {
			reason = "ErrImagePull"
		}
		before := framework.ReconcileCount(t, appcontroller.ControllerName)
		for i := range replicas {
			setWaiting(i, reason)
		}
		framework.Eventually(t, timeout, fmt.Sprintf("round %d reconciled", round), func(context.Context) (bool, error) {
			return framework.ReconcileCount(t, appcontroller.ControllerName) > before, nil
		})
		framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) {
			return m.QueuesEmpty()
		})
	}
	reconciles := framework.ReconcileCount(t, appcontroller.ControllerName) - reconcilesBefore
	t.Logf("%d pod status updates: %.0f reconciles of the App, %d writes", rounds*replicas, reconciles, m.Writes.Total()-writesBefore)
	if extra := m.Writes.Total() - writesBefore; extra != 0 {
		t.Fatalf("pod updates that change no problem made %d writes:\n%s", extra, m.Writes.Summary())
	}

	// A new problem is a new message, written once.
	setWaiting(0, "CreateContainerConfigError")
	waitReady("Ready to name both problems", fmt.Sprintf(
		`0 of %d replicas available: ImagePullBackOff for image %q (%d pods); CreateContainerConfigError (1 pod)`, replicas, image, replicas-1))
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) {
		return m.QueuesEmpty()
	})
	if got := m.Writes.Total() - writesBefore; got != 1 {
		t.Errorf("a new problem made %d writes, want 1 status update:\n%s", got, m.Writes.Summary())
	}
}
