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
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

var legacySelector = map[string]string{LegacyInstanceLabel: "web"}

// legacyDeployment is App web's Deployment as 08da2b9 made it, with
// podLabels on its template, in a status of its rollout.
func legacyDeployment(app *appv1.App, podLabels map[string]string, status appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name, Generation: 2, UID: "d-uid",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(app, appv1.SchemeGroupVersion.WithKind("App"))}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(legacySelector)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}},
		},
		Status: status,
	}
}

func serviceOn(app *appv1.App, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(app, appv1.SchemeGroupVersion.WithKind("App"))}},
		Spec: corev1.ServiceSpec{Selector: selector},
	}
}

func TestSelectorsOf(t *testing.T) {
	app := testApp()
	newSel := map[string]string{AppLabel: "web"}
	legacyPods := map[string]string{NameLabel: "web", LegacyInstanceLabel: "web"}
	bothPods := map[string]string{NameLabel: "web", LegacyInstanceLabel: "web", AppLabel: "web"}
	done := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
	rolling := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 3}
	stale := appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
	foreign := legacyDeployment(app, bothPods, done)
	foreign.OwnerReferences = nil

	cases := []struct {
		name        string
		d           *appsv1.Deployment
		svc         *corev1.Service
		wantD       map[string]string
		wantSvc     map[string]string
		wantReplace bool
	}{
		{name: "new App", wantD: newSel, wantSvc: newSel},
		{name: "migrated", d: func() *appsv1.Deployment {
			d := legacyDeployment(app, bothPods, done)
			d.Spec.Selector.MatchLabels = newSel
			return d
		}(), svc: serviceOn(app, newSel), wantD: newSel, wantSvc: newSel},
		{name: "a: legacy template", d: legacyDeployment(app, legacyPods, done), svc: serviceOn(app, legacySelector),
			wantD: legacySelector, wantSvc: legacySelector},
		{name: "a: rolling out the new labels", d: legacyDeployment(app, bothPods, rolling), svc: serviceOn(app, legacySelector),
			wantD: legacySelector, wantSvc: legacySelector},
		{name: "a: rollout not observed yet", d: legacyDeployment(app, bothPods, stale), svc: serviceOn(app, legacySelector),
			wantD: legacySelector, wantSvc: legacySelector},
		{name: "b: rolled out, Service moves", d: legacyDeployment(app, bothPods, done), svc: serviceOn(app, legacySelector),
			wantD: legacySelector, wantSvc: newSel},
		{name: "c: Service moved, Deployment replaced", d: legacyDeployment(app, bothPods, done), svc: serviceOn(app, newSel),
			wantD: legacySelector, wantSvc: newSel, wantReplace: true},
		{name: "c: Service moved, never back while a scale rolls", d: legacyDeployment(app, bothPods, rolling), svc: serviceOn(app, newSel),
			wantD: legacySelector, wantSvc: newSel},
		{name: "c: no Service to wait for", d: legacyDeployment(app, bothPods, done),
			wantD: legacySelector, wantSvc: newSel, wantReplace: true},
		{name: "a Deployment not the App's is no legacy", d: foreign, svc: serviceOn(app, legacySelector), wantD: newSel, wantSvc: newSel},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := selectorsOf(app, tc.d, tc.svc)
			if !maps.Equal(got.deployment, tc.wantD) || !maps.Equal(got.service, tc.wantSvc) || got.replaceDeployment != tc.wantReplace {
				t.Errorf("selectors = %+v, want Deployment %v, Service %v, replace %v", got, tc.wantD, tc.wantSvc, tc.wantReplace)
			}
			// The pod template always matches the Deployment's selector,
			// and carries AppLabel.
			d := mustTyped[appsv1.Deployment](t, desiredDeployment(app, got))
			for k, v := range got.deployment {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("pod labels %v do not match the selector %v", d.Spec.Template.Labels, got.deployment)
				}
			}
			if d.Spec.Template.Labels[AppLabel] != "web" {
				t.Errorf("pod labels %v lack %s", d.Spec.Template.Labels, AppLabel)
			}
			// The Deployment's own labels never carry the legacy label.
			if _, ok := d.Labels[LegacyInstanceLabel]; ok {
				t.Errorf("Deployment labels %v carry %s", d.Labels, LegacyInstanceLabel)
			}
		})
	}
}

// Step 3 deletes the legacy Deployment's old, empty ReplicaSets and then the
// Deployment, orphaning the current ReplicaSet and its pods; every delete
// is preconditioned on the UID.
func TestReplaceLegacyDeployment(t *testing.T) {
	app := testApp()
	bothPods := map[string]string{NameLabel: "web", LegacyInstanceLabel: "web", AppLabel: "web"}
	d := legacyDeployment(app, bothPods, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3})
	rs := func(name string, labels map[string]string, replicas int32, owner metav1.Object) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name + "-uid"), Labels: labels},
			Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
			Status:     appsv1.ReplicaSetStatus{Replicas: replicas},
		}
		if owner != nil {
			r.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		}
		return r
	}
	legacyPods := map[string]string{NameLabel: "web", LegacyInstanceLabel: "web"}
	current := rs("web-new", bothPods, 3, d)
	old := rs("web-old", legacyPods, 0, d)
	helm := rs("web-helm", legacyPods, 0, nil) // matches the legacy selector, not d's

	kube := fake.NewClientset(d, current, old, helm)
	c := &Controller{
		kube:        kube,
		recorder:    record.NewFakeRecorder(10),
		deployments: &controller.Deployments{Kind: "Deployment", Resource: appsv1.Resource("deployments")},
		consistency: controller.NewConsistencyStore(nil, time.Minute),
	}
	if err := c.replaceLegacyDeployment(context.Background(), app, d); err != nil {
		t.Fatal(err)
	}
	var deletes []string
	for _, a := range kube.Actions() {
		del, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			continue
		}
		opts := del.DeleteOptions
		if opts.Preconditions == nil || opts.Preconditions.UID == nil {
			t.Errorf("delete of %s %s without a UID precondition", del.Resource.Resource, del.Name)
		}
		deletes = append(deletes, fmt.Sprintf("%s/%s:%s", del.Resource.Resource, del.Name, *opts.PropagationPolicy))
	}
	want := []string{"replicasets/web-old:Background", "deployments/web:Orphan"}
	if !slices.Equal(deletes, want) {
		t.Errorf("deletes = %v, want %v", deletes, want)
	}

	// An old ReplicaSet still scaling down waits, as a conflict.
	old.Spec.Replicas, old.Status.Replicas = ptr.To[int32](1), 1
	kube = fake.NewClientset(d, current, old)
	c.kube = kube
	if err := c.replaceLegacyDeployment(context.Background(), app, d); !controller.IsTransient(err) {
		t.Errorf("error = %v, want a transient one", err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("deleted %v while an old ReplicaSet has pods", a)
		}
	}
}
