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
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// Labels every child carries, besides controller.ManagedByLabel.
const (
	NameLabel = "app.kubernetes.io/name"
	// AppLabel names the App on its children and its pods, and is the one
	// label its selectors select on: a key in the App API's own domain,
	// which no other tool writes (Helm and Argo CD write
	// app.kubernetes.io/instance), so no other pod can match.
	AppLabel = "ingress.example.com/app"
	// LegacyInstanceLabel is the label the manager selected on up to
	// 08da2b9: Helm's release label and Argo CD's tracking label. It is
	// never written on a new child; a legacy Deployment's pods keep it
	// until the Deployment is replaced (see migration.go).
	LegacyInstanceLabel = "app.kubernetes.io/instance"
)

// ContainerName is the name of the Deployment's one container.
const ContainerName = "app"

// defaultPort is for Apps stored before the CRD defaulted the port.
const defaultPort int32 = 80

func portOf(app *appv1.App) int32 {
	if app.Spec.Port == 0 {
		return defaultPort
	}
	return app.Spec.Port
}

// childLabels are the labels of every child and of the pods.
func childLabels(app *appv1.App) map[string]string {
	return map[string]string{
		NameLabel:                 app.Name,
		AppLabel:                  app.Name,
		controller.ManagedByLabel: controller.ManagedByValue,
	}
}

// selectorLabels select the App's pods.
func selectorLabels(app *appv1.App) map[string]string {
	return map[string]string{AppLabel: app.Name}
}

func controllerRef(app *appv1.App) *metav1ac.OwnerReferenceApplyConfiguration {
	gvk := appv1.SchemeGroupVersion.WithKind("App")
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).
		WithKind(gvk.Kind).
		WithName(app.Name).
		WithUID(app.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// desiredDeployment is the App's Deployment on selector sel: every field
// this controller sets, and no other. Replicas is set only when the App
// sets it: unset, the Deployment's replicas belong to whoever scales it.
func desiredDeployment(app *appv1.App, sel selectors) *appsv1ac.DeploymentApplyConfiguration {
	container := corev1ac.Container().
		WithName(ContainerName).
		WithImage(app.Spec.Image).
		// The protocol is part of the list key: server-side apply
		// needs it even though the server would default it.
		WithPorts(corev1ac.ContainerPort().
			WithContainerPort(portOf(app)).
			WithProtocol(corev1.ProtocolTCP))
	// Unset stays unset: the server defaults it, the apply configuration
	// (and its hash) of an App without one stays what it was, and an
	// apply that stops setting it hands the field back to the default.
	if app.Spec.ImagePullPolicy != "" {
		container.WithImagePullPolicy(app.Spec.ImagePullPolicy)
	}
	podLabels := childLabels(app)
	maps.Copy(podLabels, sel.deployment) // a legacy selector's labels, kept
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel.deployment)).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(podLabels).
			WithSpec(corev1ac.PodSpec().WithContainers(container)))
	if app.Spec.Replicas != nil {
		spec.WithReplicas(*app.Spec.Replicas)
	}
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controllerRef(app)).
		WithSpec(spec)
}

// desiredService is the App's ClusterIP Service, port → port, on selector
// sel.
func desiredService(app *appv1.App, sel selectors) *corev1ac.ServiceApplyConfiguration {
	port := portOf(app)
	return corev1ac.Service(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controllerRef(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(sel.service).
			WithPorts(corev1ac.ServicePort().
				WithPort(port).
				WithTargetPort(intstr.FromInt32(port)).
				WithProtocol(corev1.ProtocolTCP)))
}

// ingressHost is <app>.<namespace>.<domain>, or empty without a domain.
func ingressHost(app *appv1.App, domain string) string {
	domain = strings.Trim(domain, ".")
	if domain == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.%s", app.Name, app.Namespace, domain)
}

// desiredIngress routes / on the App's host to its Service. Without a host
// the App gets no Ingress (sync).
func desiredIngress(app *appv1.App, opts Options) *networkingv1ac.IngressApplyConfiguration {
	rule := networkingv1ac.IngressRule().
		WithHTTP(networkingv1ac.HTTPIngressRuleValue().WithPaths(networkingv1ac.HTTPIngressPath().
			WithPath("/").
			WithPathType(networkingv1.PathTypePrefix).
			WithBackend(networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().
				WithName(app.Name).
				WithPort(networkingv1ac.ServiceBackendPort().WithNumber(portOf(app))))))).
		WithHost(ingressHost(app, opts.IngressDomain))
	spec := networkingv1ac.IngressSpec().WithRules(rule)
	if opts.IngressClass != "" {
		spec.WithIngressClassName(opts.IngressClass)
	}
	return networkingv1ac.Ingress(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controllerRef(app)).
		WithSpec(spec)
}

// ingressURL is where the Ingress serves the App, empty without a host.
func ingressURL(ing *networkingv1.Ingress) string {
	if ing == nil || len(ing.Spec.Rules) == 0 || ing.Spec.Rules[0].Host == "" {
		return ""
	}
	return "http://" + ing.Spec.Rules[0].Host + "/"
}

// DesiredChildren returns the objects the controller creates for app: its
// Deployment, and its Service and Ingress when asked for (nil otherwise;
// the Ingress also nil without opts.IngressDomain to give it a host).
// Tools that measure against the controller use it, like test/bench/scale.
func DesiredChildren(app *appv1.App, opts Options) (*appsv1.Deployment, *corev1.Service, *networkingv1.Ingress, error) {
	sel := newSelectors(app)
	d, err := controller.Typed[appsv1.Deployment](desiredDeployment(app, sel))
	if err != nil {
		return nil, nil, nil, err
	}
	var svc *corev1.Service
	if app.Spec.WantsService() {
		if svc, err = controller.Typed[corev1.Service](desiredService(app, sel)); err != nil {
			return nil, nil, nil, err
		}
	}
	var ing *networkingv1.Ingress
	if app.Spec.WantsIngress() && ingressHost(app, opts.IngressDomain) != "" {
		if ing, err = controller.Typed[networkingv1.Ingress](desiredIngress(app, opts)); err != nil {
			return nil, nil, nil, err
		}
	}
	return d, svc, ing, nil
}
