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
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

const testHash = "5d8f7c9b4"

// appPod is pod i of App web in shop, as its Deployment's ReplicaSet makes
// it, with the given status.
func appPod(i int, status corev1.PodStatus) *corev1.Pod {
	app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	l := childLabels(app)
	l[appsv1.DefaultDeploymentUniqueLabelKey] = testHash
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: fmt.Sprintf("web-%s-%d", testHash, i), Labels: l,
			UID:             types.UID(fmt.Sprintf("uid-%d", i)),
			ResourceVersion: "1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: "web-" + testHash, UID: "rs", Controller: ptr.To(true)}},
		},
		Status: status,
	}
}

func waiting(reason, image string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerName, Image: image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason,
			Message: "Back-off pulling image \"" + image + "\": " + time.Now().String()}},
	}}}
}

func crashLooping(lastReason string, restarts int32, running bool) corev1.PodStatus {
	s := corev1.ContainerStatus{
		Name: ContainerName, Image: "web:1", RestartCount: restarts,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: lastReason, ExitCode: 137, FinishedAt: metav1.NewTime(time.Now().Add(time.Duration(restarts) * time.Second))}},
	}
	if running {
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
	} else {
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %ds restarting failed container", 10*restarts)}
	}
	return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{s}}
}

func unschedulable(message string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: message, LastTransitionTime: metav1.Now(),
	}}}
}

func pods(statuses ...corev1.PodStatus) []*corev1.Pod {
	var out []*corev1.Pod
	for i, s := range statuses {
		out = append(out, appPod(i, s))
	}
	return out
}

func TestPodProblems(t *testing.T) {
	long := "0/3 nodes are available: " + strings.Repeat("1 node(s) had untolerated taint {example.com/x: y}, ", 20)
	cases := []struct {
		name string
		pods []*corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"being created", pods(waiting("ContainerCreating", "web:1"), corev1.PodStatus{Phase: corev1.PodPending}), ""},
		{"image pull, both kubelet reasons", pods(waiting("ErrImagePull", "foo:latest"), waiting("ImagePullBackOff", "foo:latest"), waiting("ImagePullBackOff", "foo:latest")),
			`ImagePullBackOff for image "foo:latest" (3 pods)`},
		{"invalid image name", pods(waiting("InvalidImageName", "Foo::1")), `InvalidImageName for image "Foo::1" (1 pod)`},
		{"crash loop, waiting and running between back-offs", pods(crashLooping("OOMKilled", 3, false), crashLooping("OOMKilled", 4, true)),
			"CrashLoopBackOff (last terminated: OOMKilled) (2 pods)"},
		{"crash loop with an error", pods(crashLooping("Error", 1, false)), "CrashLoopBackOff (last terminated: Error) (1 pod)"},
		{"unschedulable", pods(unschedulable("0/3 nodes are available: 3 Insufficient cpu."), unschedulable("0/3 nodes are available: 3 Insufficient cpu.")),
			"Unschedulable: 0/3 nodes are available: 3 Insufficient cpu. (2 pods)"},
		{"other waiting reason", pods(waiting("CreateContainerConfigError", "web:1")), "CreateContainerConfigError (1 pod)"},
		{"mixed, most common first", pods(
			crashLooping("Error", 1, false),
			waiting("ImagePullBackOff", "web:2"), waiting("ErrImagePull", "web:2"),
			unschedulable("0/1 nodes are available: 1 node(s) were unschedulable."),
			waiting("ContainerCreating", "web:2"),
		), `ImagePullBackOff for image "web:2" (2 pods); CrashLoopBackOff (last terminated: Error) (1 pod); Unschedulable: 0/1 nodes are available: 1 node(s) were unschedulable. (1 pod)`},
		{"more problems than named", pods(
			waiting("ImagePullBackOff", "a:1"), waiting("ImagePullBackOff", "a:1"),
			waiting("ImagePullBackOff", "b:1"), waiting("ImagePullBackOff", "c:1"),
			waiting("ImagePullBackOff", "d:1"), waiting("InvalidImageName", "E"),
		), `ImagePullBackOff for image "a:1" (2 pods); ImagePullBackOff for image "b:1" (1 pod); ImagePullBackOff for image "c:1" (1 pod); 2 more pods with other problems`},
		{"terminating and finished pods do not count", func() []*corev1.Pod {
			p := pods(waiting("ImagePullBackOff", "a:1"), crashLooping("Error", 1, false))
			p[0].DeletionTimestamp = ptr.To(metav1.Now())
			p[1].Status.Phase = corev1.PodFailed
			return p
		}(), ""},
		{"long scheduler message, cut", pods(unschedulable(long)), "Unschedulable: " + long[:maxDetailLen-3] + "... (1 pod)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := podProblems(tc.pods); got != tc.want {
				t.Errorf("podProblems() =\n  %s\nwant\n  %s", got, tc.want)
			}
			// The cached pods, transformed, say the same.
			var cached []*corev1.Pod
			for _, p := range tc.pods {
				obj, err := TransformPod(p)
				if err != nil {
					t.Fatal(err)
				}
				cached = append(cached, obj.(*corev1.Pod))
			}
			if got := podProblems(cached); got != tc.want {
				t.Errorf("podProblems(transformed) =\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// What changes on every retry, restart or probe (kubelet messages,
// timestamps, restart counts, the pull reason, resourceVersions) changes
// neither the message, nor the cached pod beyond its resourceVersion, so it
// neither enqueues the App nor rewrites its status.
func TestPodProblemsStable(t *testing.T) {
	before := pods(waiting("ErrImagePull", "foo:1"), crashLooping("Error", 1, false), unschedulable("0/3 nodes are available."))
	after := pods(waiting("ImagePullBackOff", "foo:1"), crashLooping("Error", 7, false), unschedulable("0/3 nodes are available."))
	for _, p := range after {
		p.ResourceVersion = "2"
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastProbeTime: metav1.Now()})
	}
	after[2].Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(time.Hour))
	if a, b := podProblems(before), podProblems(after); a != b {
		t.Errorf("message changed:\n  %s\n  %s", a, b)
	}
	for i := range before {
		// The pull reason flips; everything else the cache keeps is equal.
		if i == 0 {
			continue
		}
		if podChanged(before[i], after[i]) {
			t.Errorf("pod %d: podChanged = true for an update that changes nothing kept", i)
		}
	}
	if !podChanged(before[0], pods(waiting("ImagePullBackOff", "foo:2"))[0]) {
		t.Error("podChanged = false for a new image")
	}
}

func TestReadyMessageNamesPodProblems(t *testing.T) {
	app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: 2},
		Spec: appv1.AppSpec{Image: "foo:latest", Replicas: ptr.To[int32](3)}}
	d := deployment(3, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, UnavailableReplicas: 3})
	obs := observed{deployment: d, pods: pods(waiting("ImagePullBackOff", "foo:latest"), waiting("ErrImagePull", "foo:latest"), waiting("ImagePullBackOff", "foo:latest"))}
	status := appStatus(app, obs, metav1.Now())
	ready := meta.FindStatusCondition(status.Conditions, appv1.ConditionReady)
	want := `0 of 3 replicas available: ImagePullBackOff for image "foo:latest" (3 pods)`
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != appv1.ReasonReplicasUnavailable || ready.Message != want {
		t.Fatalf("Ready = %+v, want False %s %q", ready, appv1.ReasonReplicasUnavailable, want)
	}
	// The next reconcile, the pull reason flipped: the same status.
	app.Status = status
	obs.pods = pods(waiting("ErrImagePull", "foo:latest"), waiting("ImagePullBackOff", "foo:latest"), waiting("ErrImagePull", "foo:latest"))
	if again := appStatus(app, obs, metav1.NewTime(time.Now().Add(time.Minute))); !equalStatus(again, status) {
		t.Errorf("status changed:\n%+v\n%+v", again, status)
	}
}

func equalStatus(a, b appv1.AppStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

func TestAppOfPod(t *testing.T) {
	app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	mine := appPod(0, corev1.PodStatus{})
	if name, ok := appNameOfPod(mine); !ok || name != "web" {
		t.Errorf("appNameOfPod(App's pod) = %q, %v", name, ok)
	}
	if !PodSelector().Matches(labels.Set(mine.Labels)) {
		t.Errorf("PodSelector %s does not select the App's pod %v", PodSelector(), mine.Labels)
	}
	// Labels of a pod of App web's Deployment's template.
	tmpl := desiredDeployment(app, newSelectors(app)).Spec.Template.Labels
	if !PodSelector().Matches(labels.Set(tmpl)) {
		t.Errorf("PodSelector %s does not select the pod template's labels %v", PodSelector(), tmpl)
	}

	other := appPod(1, corev1.PodStatus{})
	other.OwnerReferences[0].Name = "someone-else-" + testHash
	bare := appPod(2, corev1.PodStatus{})
	bare.OwnerReferences = nil
	step := appPod(3, corev1.PodStatus{})
	step.Labels[pipelineLabel] = "p"
	for _, p := range []*corev1.Pod{other, bare} {
		if _, ok := appNameOfPod(p); ok {
			t.Errorf("appNameOfPod(%s) found an App for a pod not made by its Deployment", p.Name)
		}
	}
	if PodSelector().Matches(labels.Set(step.Labels)) {
		t.Errorf("PodSelector selects a Pipeline step's pod")
	}
	// Since issue 35 a step's pods carry no pipeline label, only the step's.
	labelledStep := appPod(4, corev1.PodStatus{})
	labelledStep.Labels["distri-infer.ndsl.cn/step"] = "p-a-abcdefghijklm"
	if PodSelector().Matches(labels.Set(labelledStep.Labels)) {
		t.Errorf("PodSelector selects a Pipeline step's pod labelled with its step only: %v", labelledStep.Labels)
	}
	if got := podsOf(app, []*corev1.Pod{mine, other, bare}); len(got) != 1 || got[0] != mine {
		t.Errorf("podsOf = %v, want only %s", got, mine.Name)
	}

	// A pod of a Deployment an older manager made, on the instance label
	// alone, is the App's until the Deployment is replaced.
	legacy := appPod(4, corev1.PodStatus{})
	delete(legacy.Labels, AppLabel)
	legacy.Labels[LegacyInstanceLabel] = "web"
	if name, ok := appNameOfPod(legacy); !ok || name != "web" {
		t.Errorf("appNameOfPod(legacy pod) = %q, %v", name, ok)
	}
	if !PodSelector().Matches(labels.Set(legacy.Labels)) {
		t.Errorf("PodSelector %s does not select a legacy pod %v", PodSelector(), legacy.Labels)
	}
	// A Helm release's pod named like the App is not the manager's.
	helm := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", Labels: map[string]string{
		LegacyInstanceLabel: "web", NameLabel: "web", controller.ManagedByLabel: "Helm",
	}}}
	if PodSelector().Matches(labels.Set(helm.Labels)) {
		t.Errorf("PodSelector %s selects a Helm pod %v", PodSelector(), helm.Labels)
	}
	if _, ok := appNameOfPod(helm); ok {
		t.Errorf("appNameOfPod found an App for a Helm pod")
	}
}

func TestTransformPodTombstone(t *testing.T) {
	p := appPod(0, waiting("ImagePullBackOff", "foo:1"))
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	obj, err := TransformPod(cache.DeletedFinalStateUnknown{Key: "shop/" + p.Name, Obj: p})
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(cache.DeletedFinalStateUnknown).Obj.(*corev1.Pod)
	if got.ManagedFields != nil || got.Name != p.Name || got.Labels[AppLabel] != "web" {
		t.Errorf("transformed tombstone pod = %+v", got)
	}
}
