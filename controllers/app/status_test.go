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
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// deployment is the App's Deployment with the given generation and status.
func deployment(replicas int32, generation int64, status appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: generation},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status:     status,
	}
}

func rolledOut(replicas int32) *appsv1.Deployment {
	return deployment(replicas, 2, appsv1.DeploymentStatus{ObservedGeneration: 2,
		Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas})
}

func ingress(host string) *networkingv1.Ingress {
	return &networkingv1.Ingress{Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host}}}}
}

type wantCondition struct {
	status  metav1.ConditionStatus
	reason  string
	message string // a substring
}

func TestAppStatus(t *testing.T) {
	svc := &corev1.Service{}
	notOwned := controller.NewNotOwnedError("Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}})
	cases := []struct {
		name            string
		app             *appv1.App
		obs             observed
		wantReplicas    [3]int32 // replicas, ready, available
		wantURL         string
		wantReady       wantCondition
		wantProgressing wantCondition
		wantDegraded    wantCondition
	}{
		{
			name:            "just created: nothing observed by the deployment controller yet",
			app:             testApp(),
			obs:             observed{deployment: deployment(3, 1, appsv1.DeploymentStatus{}), service: svc, ingress: ingress("web.shop.example.com")},
			wantURL:         "http://web.shop.example.com/",
			wantReady:       wantCondition{metav1.ConditionFalse, appv1.ReasonReplicasUnavailable, "0 of 3 replicas available"},
			wantProgressing: wantCondition{metav1.ConditionTrue, appv1.ReasonRollingOut, "replicas to be updated"},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
		{
			name:            "pods coming up",
			app:             testApp(),
			obs:             observed{deployment: deployment(3, 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1}), service: svc, ingress: ingress("")},
			wantReplicas:    [3]int32{3, 2, 1},
			wantReady:       wantCondition{metav1.ConditionFalse, appv1.ReasonReplicasUnavailable, "1 of 3"},
			wantProgressing: wantCondition{metav1.ConditionTrue, appv1.ReasonRollingOut, "available"},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
		{
			name:            "rolled out, the Ingress refused for want of a host",
			app:             testApp(),
			obs:             observed{deployment: rolledOut(3), service: svc, ingressHostRequired: true},
			wantReplicas:    [3]int32{3, 3, 3},
			wantReady:       wantCondition{metav1.ConditionFalse, appv1.ReasonIngressHostRequired, "--app-ingress-domain"},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonRolloutComplete, ""},
			wantDegraded:    wantCondition{metav1.ConditionTrue, appv1.ReasonIngressHostRequired, "would catch every request"},
		},
		{
			name:            "rolled out, every child present",
			app:             testApp(),
			obs:             observed{deployment: rolledOut(3), service: svc, ingress: ingress("web.shop.example.com")},
			wantReplicas:    [3]int32{3, 3, 3},
			wantURL:         "http://web.shop.example.com/",
			wantReady:       wantCondition{metav1.ConditionTrue, appv1.ReasonAvailable, "3 of 3"},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonRolloutComplete, ""},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
		{
			name: "Deployment only: no Service or Ingress asked for",
			app: testApp(func(a *appv1.App) {
				a.Spec.Exposure = appv1.ExposureNone
			}),
			obs:             observed{deployment: rolledOut(3)},
			wantReplicas:    [3]int32{3, 3, 3},
			wantReady:       wantCondition{metav1.ConditionTrue, appv1.ReasonAvailable, ""},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonRolloutComplete, ""},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
		{
			name:            "zero replicas are ready at once",
			app:             testApp(func(a *appv1.App) { a.Spec.Replicas = ptr.To[int32](0) }),
			obs:             observed{deployment: rolledOut(0), service: svc, ingress: ingress("")},
			wantReady:       wantCondition{metav1.ConditionTrue, appv1.ReasonAvailable, "0 of 0"},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonRolloutComplete, ""},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
		{
			name:            "someone else's Service: not ready, degraded, the Ingress held back",
			app:             testApp(),
			obs:             observed{deployment: rolledOut(3), errs: []error{notOwned}},
			wantReplicas:    [3]int32{3, 3, 3},
			wantReady:       wantCondition{metav1.ConditionFalse, appv1.ReasonResourceMissing, "Missing Service web, Ingress web"},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonRolloutComplete, ""},
			wantDegraded:    wantCondition{metav1.ConditionTrue, appv1.ReasonResourceExists, "Service shop/web exists and is not ours"},
		},
		{
			name: "transient errors are left out, a real failure is not",
			app:  testApp(),
			obs: observed{deployment: rolledOut(3), service: svc, errs: []error{
				apierrors.NewAlreadyExists(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "web"),
				errors.New("update Deployment shop/web: etcd is sad"),
			}},
			wantReplicas:    [3]int32{3, 3, 3},
			wantReady:       wantCondition{metav1.ConditionFalse, appv1.ReasonResourceMissing, "Missing Ingress web"},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonRolloutComplete, ""},
			wantDegraded:    wantCondition{metav1.ConditionTrue, appv1.ReasonReconcileFailed, "update Deployment shop/web: etcd is sad"},
		},
		{
			name: "only transient errors: not Degraded (issue 12, defect 5)",
			app:  testApp(),
			obs: observed{deployment: rolledOut(3), service: svc, ingress: ingress(""), errs: []error{
				fmt.Errorf("update Deployment shop/web: %w", apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("the object has been modified"))),
				fmt.Errorf("update status of App: %w", context.Canceled),
			}},
			wantReplicas:    [3]int32{3, 3, 3},
			wantReady:       wantCondition{metav1.ConditionTrue, appv1.ReasonAvailable, ""},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonRolloutComplete, ""},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
		{
			name:            "write failed",
			app:             testApp(),
			obs:             observed{errs: []error{errors.New("create Deployment shop/web: forbidden")}, service: svc, ingress: ingress("")},
			wantReady:       wantCondition{metav1.ConditionFalse, appv1.ReasonResourceMissing, "Missing Deployment web"},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonResourceMissing, "Deployment web does not exist"},
			wantDegraded:    wantCondition{metav1.ConditionTrue, appv1.ReasonReconcileFailed, "forbidden"},
		},
		{
			name: "progress deadline exceeded",
			app:  testApp(),
			obs: observed{deployment: deployment(3, 1, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
					Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5d" has timed out progressing.`}}}),
				service: svc, ingress: ingress("")},
			wantReplicas:    [3]int32{3, 0, 0},
			wantReady:       wantCondition{metav1.ConditionFalse, appv1.ReasonReplicasUnavailable, ""},
			wantProgressing: wantCondition{metav1.ConditionFalse, appv1.ReasonProgressDeadlineExceeded, "timed out"},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
		{
			name: "old replicas still terminating",
			app:  testApp(),
			obs: observed{deployment: deployment(3, 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3,
				ReadyReplicas: 4, AvailableReplicas: 4}), service: svc, ingress: ingress("")},
			wantReplicas:    [3]int32{4, 4, 4},
			wantReady:       wantCondition{metav1.ConditionTrue, appv1.ReasonAvailable, ""},
			wantProgressing: wantCondition{metav1.ConditionTrue, appv1.ReasonRollingOut, "old replicas"},
			wantDegraded:    wantCondition{metav1.ConditionFalse, appv1.ReasonAsExpected, ""},
		},
	}
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := appStatus(tc.app, tc.obs, now)
			if s.ObservedGeneration != tc.app.Generation {
				t.Errorf("observedGeneration = %d, want %d", s.ObservedGeneration, tc.app.Generation)
			}
			if got := [3]int32{s.Replicas, s.ReadyReplicas, s.AvailableReplicas}; got != tc.wantReplicas {
				t.Errorf("replicas, ready, available = %v, want %v", got, tc.wantReplicas)
			}
			if s.URL != tc.wantURL {
				t.Errorf("url = %q, want %q", s.URL, tc.wantURL)
			}
			if len(s.Conditions) != 3 {
				t.Errorf("conditions = %+v, want Ready, Progressing and Degraded", s.Conditions)
			}
			checkCondition(t, s, appv1.ConditionReady, tc.wantReady)
			checkCondition(t, s, appv1.ConditionProgressing, tc.wantProgressing)
			checkCondition(t, s, appv1.ConditionDegraded, tc.wantDegraded)
		})
	}
}

func checkCondition(t *testing.T, s appv1.AppStatus, conditionType string, want wantCondition) {
	t.Helper()
	c := meta.FindStatusCondition(s.Conditions, conditionType)
	if c == nil {
		t.Errorf("no %s condition", conditionType)
		return
	}
	if c.Status != want.status || c.Reason != want.reason || !strings.Contains(c.Message, want.message) {
		t.Errorf("%s = %s/%s %q, want %s/%s containing %q", conditionType, c.Status, c.Reason, c.Message, want.status, want.reason, want.message)
	}
	if c.ObservedGeneration != 1 {
		t.Errorf("%s observedGeneration = %d, want 1", conditionType, c.ObservedGeneration)
	}
}

// A second reconcile of an unchanged world computes the same status, so it
// writes nothing; a changed condition gets a new transition time, the others
// keep theirs.
func TestAppStatusIsStable(t *testing.T) {
	app := testApp()
	obs := observed{deployment: deployment(3, 1, appsv1.DeploymentStatus{}), service: &corev1.Service{}, ingress: ingress("h")}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	app.Status = appStatus(app, obs, t0)

	again := appStatus(app, obs, metav1.NewTime(t0.Add(time.Hour)))
	if !apiequality.Semantic.DeepEqual(again, app.Status) {
		t.Fatalf("status changed without a change in the world:\n%+v\n%+v", app.Status, again)
	}

	t1 := metav1.NewTime(t0.Add(2 * time.Hour))
	obs.deployment = rolledOut(3)
	next := appStatus(app, obs, t1)
	if c := meta.FindStatusCondition(next.Conditions, appv1.ConditionReady); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("Ready transitioned at %v, want %v", c.LastTransitionTime, t1)
	}
	if c := meta.FindStatusCondition(next.Conditions, appv1.ConditionDegraded); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("unchanged Degraded moved its transition time to %v", c.LastTransitionTime)
	}
	// The App's own status is not modified in place.
	if c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Error("appStatus modified the App's conditions")
	}
}

// The deployment controller's first look at a new Deployment (it observes
// the generation and makes the ReplicaSet, no replica yet) is no news for
// the App: its status, written when it created the Deployment, stands.
func TestAppStatusStandsWhenTheDeploymentIsFirstObserved(t *testing.T) {
	app := testApp()
	obs := observed{deployment: deployment(3, 1, appsv1.DeploymentStatus{}), service: &corev1.Service{}, ingress: ingress("h")}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	app.Status = appStatus(app, obs, t0)

	obs.deployment = deployment(3, 1, appsv1.DeploymentStatus{ObservedGeneration: 1})
	if again := appStatus(app, obs, metav1.NewTime(t0.Add(time.Second))); !apiequality.Semantic.DeepEqual(again, app.Status) {
		t.Fatalf("the deployment controller's first look changed the status, a write for no news:\n%+v\n%+v", app.Status, again)
	}
}

// Unset replicas are the Deployment's, whoever scaled it; the selector is
// the Deployment's, a legacy one's while it lives.
func TestAppStatusReplicasUnsetAndSelector(t *testing.T) {
	app := testApp(func(a *appv1.App) { a.Spec.Replicas = nil })
	d := rolledOut(4)
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: "web"}}
	status := appStatus(app, observed{deployment: d, service: &corev1.Service{}, ingress: ingress("")}, metav1.Now())
	ready := meta.FindStatusCondition(status.Conditions, appv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Message != "4 of 4 replicas available" {
		t.Errorf("Ready = %+v, want True, 4 of 4", ready)
	}
	if status.Selector != AppLabel+"=web" {
		t.Errorf("selector = %q, want %s=web", status.Selector, AppLabel)
	}

	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{LegacyInstanceLabel: "web"}}
	if got := appStatus(app, observed{deployment: d}, metav1.Now()).Selector; got != LegacyInstanceLabel+"=web" {
		t.Errorf("selector of a legacy Deployment = %q", got)
	}
	if got := appStatus(app, observed{}, metav1.Now()).Selector; got != AppLabel+"=web" {
		t.Errorf("selector without a Deployment = %q, want the one it will have", got)
	}
}

// The Warning about a refused Ingress goes out when the status first says
// so, not at every resync.
func TestNewlyRefused(t *testing.T) {
	app := testApp()
	obs := observed{deployment: rolledOut(3), service: &corev1.Service{}, ingressHostRequired: true}
	refused := appStatus(app, obs, metav1.Now())
	if !newlyRefused(app.Status, refused) {
		t.Error("the first refused status is not news")
	}
	if newlyRefused(refused, refused) {
		t.Error("a refused status again is news")
	}
	obs.ingressHostRequired, obs.ingress = false, ingress("web.shop.example.com")
	if served := appStatus(app, obs, metav1.Now()); newlyRefused(refused, served) || newlyRefused(app.Status, served) {
		t.Error("a served Ingress is news of a refusal")
	}
}
