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
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

func deploymentWith(replicas, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas,
			UpdatedReplicas: replicas, ReadyReplicas: ready},
	}
}

// world is a converged Pipeline's observation: bound storage, ready steps.
func world(p *pipelinev1.Pipeline) observed {
	obs := observed{
		namespace: "ns",
		volume:    &corev1.PersistentVolume{Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}},
		claim:     &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
	}
	for i, s := range p.Spec.Steps {
		obs.steps = append(obs.steps, observedStep{
			model: s.Model, deploymentName: StepName(p.Name, s.Model), serviceName: StepName(p.Name, s.Model),
			deployment: deploymentWith(1, 1), service: mustTyped[corev1.Service](desiredService(p, "ns", i)),
		})
	}
	return obs
}

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cases := []struct {
		name   string
		change func(obs *observed)
		// want maps condition type to status and a substring of the message.
		want map[string][2]string
	}{{
		name: "converged",
		want: map[string][2]string{
			"Ready": {"True", ""}, "StorageReady": {"True", "is bound"},
			"StepsReady": {"True", "All 2 steps"}, "Degraded": {"False", ""},
		},
	}, {
		name: "storage pending",
		change: func(obs *observed) {
			obs.claim.Status.Phase = corev1.ClaimPending
			obs.volume.Status.Phase = corev1.VolumeAvailable
		},
		want: map[string][2]string{
			"Ready": {"False", "is Pending"}, "StorageReady": {"False", "is Pending, PersistentVolume"},
			"StepsReady": {"True", ""}, "Degraded": {"False", ""},
		},
	}, {
		name: "a step pinned to a missing node",
		change: func(obs *observed) {
			obs.steps[1].deployment = deploymentWith(1, 0)
			obs.steps[1].missingNodes = []string{"xx-test-node239"}
		},
		want: map[string][2]string{
			"Ready":      {"False", "step 2 (facedetection-2): 0/1 replicas ready, pinned to missing node(s) xx-test-node239"},
			"StepsReady": {"False", "pinned to missing node(s) xx-test-node239"}, "Degraded": {"False", ""},
		},
	}, {
		name: "an unowned Deployment",
		change: func(obs *observed) {
			err := &controller.NotOwnedError{Kind: "Deployment", Namespace: "ns", Name: "theirs"}
			obs.steps[0].deployment, obs.steps[0].deploymentErr = nil, err
			obs.conflicts = append(obs.conflicts, err)
		},
		want: map[string][2]string{
			"Ready":      {"False", "Deployment ns/theirs exists and is not ours"},
			"StepsReady": {"False", "Deployment ns/" + StepName("facedetection-pipeline", "facedetection-1") + " is not controlled by this Pipeline"},
			"Degraded":   {"True", "exists and is not ours"},
		},
	}, {
		name: "a failed write",
		change: func(obs *observed) {
			obs.steps[1].service = nil
			obs.failures = append(obs.failures, errors.New("create Service ns/x: exceeded quota"))
		},
		want: map[string][2]string{
			"Ready": {"False", "exceeded quota"}, "Degraded": {"True", "exceeded quota"},
		},
	}, {
		name: "an unowned PersistentVolume",
		change: func(obs *observed) {
			err := &controller.NotOwnedError{Kind: "PersistentVolume", Name: "theirs"}
			obs.volume, obs.volumeErr = nil, err
			obs.conflicts = append(obs.conflicts, err)
		},
		want: map[string][2]string{
			"StorageReady": {"False", "is not controlled by this Pipeline"}, "Degraded": {"True", "PersistentVolume theirs"},
		},
	}, {
		name: "an unowned PersistentVolumeClaim: no volume is written for it",
		change: func(obs *observed) {
			err := &controller.NotOwnedError{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "theirs"}
			obs.volume, obs.claim, obs.claimErr = nil, nil, err
			obs.conflicts = append(obs.conflicts, err)
		},
		want: map[string][2]string{
			"StorageReady": {"False", "is not controlled by this Pipeline"}, "Degraded": {"True", "PersistentVolumeClaim ns/theirs"},
		},
	}, {
		name:   "a step without its Service",
		change: func(obs *observed) { obs.steps[1].service = nil },
		want: map[string][2]string{
			"StepsReady": {"False", "step 2 (facedetection-2): Service ns/" + StepName("facedetection-pipeline", "facedetection-2") + " does not exist"},
		},
	}, {
		name: "a step whose DST would name a Service of someone else's",
		change: func(obs *observed) {
			err := &controller.NotOwnedError{Kind: "Service", Namespace: "ns", Name: obs.steps[1].serviceName, Owner: "App theirs"}
			obs.steps[1].service, obs.steps[1].serviceErr = nil, err
			obs.steps[0].deployment, obs.steps[0].dstBlocker = nil, dstBlocker("ns", obs.steps[1])
			obs.conflicts = append(obs.conflicts, err)
		},
		want: map[string][2]string{
			"StepsReady": {"False", "step 1 (facedetection-1): Deployment ns/" + StepName("facedetection-pipeline", "facedetection-1") +
				" is not written while its DST would name a Service that is not this Pipeline's: Service ns/" +
				StepName("facedetection-pipeline", "facedetection-2") + " exists and is not ours (it has controller App theirs)"},
			"Degraded": {"True", "(it has controller App theirs)"},
		},
	}, {
		name: "a step whose DST would name a Service that could not be created",
		change: func(obs *observed) {
			err := errors.New("create Service ns/x: exceeded quota")
			obs.steps[1].service, obs.steps[1].serviceErr = nil, err
			obs.steps[0].deployment, obs.steps[0].dstBlocker = nil, dstBlocker("ns", obs.steps[1])
			obs.failures = append(obs.failures, err)
		},
		want: map[string][2]string{
			"StepsReady": {"False", "not this Pipeline's: create Service ns/x: exceeded quota"},
		},
	}, {
		name: "pods refused by PodSecurity admission",
		change: func(obs *observed) {
			d := deploymentWith(1, 0)
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
				Reason: "FailedCreate", Message: `pods "x-" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`}}
			obs.steps[0].deployment = d
		},
		want: map[string][2]string{
			"StepsReady": {"False", `step 1 (facedetection-1): 0/1 replicas ready: pods "x-" is forbidden: violates PodSecurity "restricted:latest"`},
		},
	}, {
		name:   "rollout in progress",
		change: func(obs *observed) { obs.steps[0].deployment.Generation = 3 },
		want:   map[string][2]string{"StepsReady": {"False", "step 1 (facedetection-1): 1/1 replicas ready"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := stored(samplePipeline())
			obs := world(p)
			if tc.change != nil {
				tc.change(&obs)
			}
			status := computeStatus(p, obs, now)
			if status.ObservedGeneration != 1 || len(status.Steps) != 2 {
				t.Errorf("status = %+v", status)
			}
			for typ, want := range tc.want {
				cond := meta.FindStatusCondition(status.Conditions, typ)
				if cond == nil {
					t.Fatalf("no %s condition", typ)
				}
				if string(cond.Status) != want[0] || !strings.Contains(cond.Message, want[1]) {
					t.Errorf("%s = %s %q (%s), want %s containing %q", typ, cond.Status, cond.Message, cond.Reason, want[0], want[1])
				}
				if cond.ObservedGeneration != 1 || cond.Reason == "" {
					t.Errorf("%s: observedGeneration %d, reason %q", typ, cond.ObservedGeneration, cond.Reason)
				}
			}
		})
	}
}

func TestComputeStatusIsStable(t *testing.T) {
	p := stored(samplePipeline())
	first := computeStatus(p, world(p), metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second)))
	p.Status = first
	again := computeStatus(p, world(p), metav1.NewTime(time.Now().Truncate(time.Second)))
	if !apiequality.Semantic.DeepEqual(first, again) {
		t.Fatalf("the same world gave a different status (a write on every resync):\n%+v\n%+v", first, again)
	}
	st := again.Steps[0]
	if st.Model != "facedetection-1" || st.DeploymentName != StepName("facedetection-pipeline", "facedetection-1") ||
		st.ServiceName != st.DeploymentName || st.Replicas != 1 || st.ReadyReplicas != 1 {
		t.Errorf("step status = %+v", st)
	}
	if s := again.Storage; s.PVName != storageName(p, "ns") || s.PVCName != s.PVName || s.PVPhase != "Bound" || s.PVCPhase != "Bound" {
		t.Errorf("storage status = %+v", s)
	}

	// A change moves the transition time of the condition that changed only.
	obs := world(p)
	obs.steps[0].deployment = deploymentWith(1, 0)
	later := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	changed := computeStatus(p, obs, later)
	if c := meta.FindStatusCondition(changed.Conditions, "StepsReady"); !c.LastTransitionTime.Equal(&later) {
		t.Error("StepsReady changed but kept its transition time")
	}
	if c := meta.FindStatusCondition(changed.Conditions, "StorageReady"); c.LastTransitionTime.Equal(&later) {
		t.Error("StorageReady did not change but got a new transition time")
	}
}
