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
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// pipelineLabel was on every pod of a Pipeline step (pipeline.LabelPipeline)
// until issue 35; stepLabel (pipeline.LabelStepChild) is since. Step pods
// carry the manager's managed-by label too.
const (
	pipelineLabel = "pipeline"
	stepLabel     = pipelinev1beta1.GroupName + "/step"
)

// PodSelector selects the pods the controller caches: those of the manager's
// own Deployments (their template carries the managed-by label) that are no
// Pipeline step's. It is the pod informer's list and watch selector, so no
// other pod of the cluster reaches the manager. It requires no App label:
// the pods of a legacy Deployment carry LegacyInstanceLabel instead of
// AppLabel until their App is migrated (migration.go).
func PodSelector() labels.Selector {
	managed, _ := labels.NewRequirement(controller.ManagedByLabel, selection.Equals, []string{controller.ManagedByValue})
	notPipeline, _ := labels.NewRequirement(pipelineLabel, selection.DoesNotExist, nil)
	notStep, _ := labels.NewRequirement(stepLabel, selection.DoesNotExist, nil)
	return labels.NewSelector().Add(*managed, *notPipeline, *notStep)
}

// Bounds on what a pod contributes to the Ready condition's message.
const (
	maxDetailLen = 160 // a scheduler's or kubelet's message, cut
	maxProblems  = 3   // distinct problems named; the rest are counted
)

// TransformPod is the pod informer's transform: it keeps only what
// podProblem reads and what the informer and the event handlers need, so a
// cached pod costs a fraction of a full one. It keeps no timestamps,
// restart counts or kubelet messages, which change without the problem
// changing. It may be given an already transformed pod, or a tombstone.
func TransformPod(obj any) (any, error) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if pod, ok := tombstone.Obj.(*corev1.Pod); ok {
			tombstone.Obj = strippedPod(pod)
		}
		return tombstone, nil
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		// Compact shares the strings every pod of a Deployment repeats.
		return controller.Compact(strippedPod(pod))
	}
	return obj, nil
}

func strippedPod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			Labels:            pod.Labels,
			OwnerReferences:   pod.OwnerReferences,
			DeletionTimestamp: pod.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out.Status.Conditions = []corev1.PodCondition{{
				Type: c.Type, Status: c.Status, Reason: c.Reason, Message: truncate(c.Message, maxDetailLen),
			}}
		}
	}
	out.Status.InitContainerStatuses = strippedContainers(pod.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = strippedContainers(pod.Status.ContainerStatuses)
	return out
}

func strippedContainers(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(statuses) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(statuses))
	for i, s := range statuses {
		out[i] = corev1.ContainerStatus{Name: s.Name, Image: s.Image, Ready: s.Ready}
		switch {
		case s.State.Waiting != nil:
			out[i].State.Waiting = &corev1.ContainerStateWaiting{Reason: s.State.Waiting.Reason}
		case s.State.Running != nil:
			out[i].State.Running = &corev1.ContainerStateRunning{}
		case s.State.Terminated != nil:
			out[i].State.Terminated = &corev1.ContainerStateTerminated{Reason: s.State.Terminated.Reason, ExitCode: s.State.Terminated.ExitCode}
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			out[i].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: t.Reason, ExitCode: t.ExitCode}
		}
	}
	return out
}

// podChanged reports whether an update changed anything the transform keeps
// besides the resourceVersion: only those updates can change a problem.
func podChanged(oldObj, newObj any) bool {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	newPod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	a, b := *strippedPod(oldPod), *strippedPod(newPod)
	a.ResourceVersion, b.ResourceVersion = "", ""
	return !equality.Semantic.DeepEqual(a, b)
}

// appNameOfPod is the App whose Deployment's pods pod is one of, by its labels:
// AppLabel names the App (LegacyInstanceLabel on the pods of a Deployment
// not yet migrated), and the pod is controlled by one of the ReplicaSets
// the Deployment controller names after the Deployment.
func appNameOfPod(pod *corev1.Pod) (string, bool) {
	name := pod.Labels[AppLabel]
	if name == "" {
		name = pod.Labels[LegacyInstanceLabel]
	}
	if name == "" || pod.Labels[controller.ManagedByLabel] != controller.ManagedByValue {
		return "", false
	}
	ref := metav1.GetControllerOf(pod)
	hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	if ref == nil || ref.Kind != "ReplicaSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() ||
		hash == "" || ref.Name != name+"-"+hash {
		return "", false
	}
	return name, true
}

// podProblem is why one pod is not available, as `kubectl get pods` shows
// it in its STATUS column, with what it is about: an image, the last
// termination reason or the scheduler's message. Empty for a pod with no
// known problem (being created, terminating, or simply not ready yet).
type podProblem struct {
	reason string
	detail string
}

func (p podProblem) String() string {
	switch p.reason {
	case "":
		return ""
	case "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		return fmt.Sprintf("%s for image %q", p.reason, p.detail)
	case "CrashLoopBackOff":
		if p.detail == "" {
			return p.reason
		}
		return fmt.Sprintf("%s (last terminated: %s)", p.reason, p.detail)
	}
	if p.detail == "" {
		return p.reason
	}
	return p.reason + ": " + p.detail
}

// problemOf finds the first problem of a pod: unschedulable, then an init
// container's, then a container's.
func problemOf(pod *corev1.Pod) podProblem {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return podProblem{}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return podProblem{reason: c.Reason, detail: truncate(c.Message, maxDetailLen)}
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			if p := containerProblem(s); p.reason != "" {
				return p
			}
		}
	}
	return podProblem{}
}

func containerProblem(s corev1.ContainerStatus) podProblem {
	var lastTerminated string
	if t := s.LastTerminationState.Terminated; t != nil {
		lastTerminated = cmp.Or(t.Reason, fmt.Sprintf("exit code %d", t.ExitCode))
	}
	switch {
	case s.State.Waiting != nil:
		switch reason := s.State.Waiting.Reason; reason {
		case "", "ContainerCreating", "PodInitializing":
			return podProblem{}
		case "ErrImagePull", "ImagePullBackOff":
			// The kubelet alternates between the two on every retry.
			return podProblem{reason: "ImagePullBackOff", detail: s.Image}
		case "InvalidImageName", "ErrImageNeverPull":
			return podProblem{reason: reason, detail: s.Image}
		case "CrashLoopBackOff":
			return podProblem{reason: reason, detail: lastTerminated}
		default: // CreateContainerConfigError, RunContainerError...
			return podProblem{reason: reason}
		}
	case s.State.Running != nil && !s.Ready && lastTerminated != "":
		// Between two back-offs a crash-looping container runs for a
		// while: that must not change the message.
		return podProblem{reason: "CrashLoopBackOff", detail: lastTerminated}
	}
	return podProblem{}
}

// podProblems summarises why the pods are not available, most common
// problem first, e.g. `ImagePullBackOff for image "foo:latest" (3 pods)`.
// Empty when no pod has a known problem. The text depends only on the set
// of problems and their counts, and is bounded in length.
func podProblems(pods []*corev1.Pod) string {
	counts := map[string]int{}
	for _, pod := range pods {
		if p := problemOf(pod).String(); p != "" {
			counts[p]++
		}
	}
	problems := make([]string, 0, len(counts))
	for p := range counts {
		problems = append(problems, p)
	}
	slices.SortFunc(problems, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	var parts []string
	for i, p := range problems {
		if i == maxProblems {
			rest := 0
			for _, q := range problems[i:] {
				rest += counts[q]
			}
			parts = append(parts, fmt.Sprintf("%d more %s with other problems", rest, plural(rest, "pod")))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d %s)", p, counts[p], plural(counts[p], "pod")))
	}
	return strings.Join(parts, "; ")
}

// podsOf returns the App's pods among pods.
func podsOf(app *appv1.App, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if name, ok := appNameOfPod(pod); ok && name == app.Name && pod.Namespace == app.Namespace {
			out = append(out, pod)
		}
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
