package app

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// Labels every child carries, besides controller.ManagedByLabel.
const (
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
)

// ContainerName is the name of the Deployment's one container.
const ContainerName = "app"

// Defaults for fields the CRD defaults, for Apps stored before the default
// existed.
const (
	defaultReplicas int32 = 1
	defaultPort     int32 = 80
)

func desiredReplicas(app *appv1beta1.App) int32 {
	return ptr.Deref(app.Spec.Replicas, defaultReplicas)
}

func portOf(app *appv1beta1.App) int32 {
	if app.Spec.Port == 0 {
		return defaultPort
	}
	return app.Spec.Port
}

// childLabels are the labels of every child and of the pods.
func childLabels(app *appv1beta1.App) map[string]string {
	return map[string]string{
		NameLabel:                 app.Name,
		InstanceLabel:             app.Name,
		controller.ManagedByLabel: controller.ManagedByValue,
	}
}

// selectorLabels select the App's pods.
func selectorLabels(app *appv1beta1.App) map[string]string {
	return map[string]string{InstanceLabel: app.Name}
}

func controllerRef(app *appv1beta1.App) *metav1ac.OwnerReferenceApplyConfiguration {
	gvk := appv1beta1.SchemeGroupVersion.WithKind("App")
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).
		WithKind(gvk.Kind).
		WithName(app.Name).
		WithUID(app.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// desiredDeployment is the App's Deployment: every field this controller
// sets, and no other.
func desiredDeployment(app *appv1beta1.App) *appsv1ac.DeploymentApplyConfiguration {
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
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controllerRef(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(desiredReplicas(app)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(childLabels(app)).
				WithSpec(corev1ac.PodSpec().WithContainers(container))))
}

// desiredService is the App's ClusterIP Service, port → port.
func desiredService(app *appv1beta1.App) *corev1ac.ServiceApplyConfiguration {
	port := portOf(app)
	return corev1ac.Service(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controllerRef(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(selectorLabels(app)).
			WithPorts(corev1ac.ServicePort().
				WithPort(port).
				WithTargetPort(intstr.FromInt32(port)).
				WithProtocol(corev1.ProtocolTCP)))
}

// ingressHost is <app>.<namespace>.<domain>, or empty without a domain.
func ingressHost(app *appv1beta1.App, domain string) string {
	domain = strings.Trim(domain, ".")
	if domain == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.%s", app.Name, app.Namespace, domain)
}

// desiredIngress routes / on the App's host to its Service.
func desiredIngress(app *appv1beta1.App, opts Options) *networkingv1ac.IngressApplyConfiguration {
	rule := networkingv1ac.IngressRule().
		WithHTTP(networkingv1ac.HTTPIngressRuleValue().WithPaths(networkingv1ac.HTTPIngressPath().
			WithPath("/").
			WithPathType(networkingv1.PathTypePrefix).
			WithBackend(networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().
				WithName(app.Name).
				WithPort(networkingv1ac.ServiceBackendPort().WithNumber(portOf(app)))))))
	if host := ingressHost(app, opts.IngressDomain); host != "" {
		rule.WithHost(host)
	}
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
// Deployment, and its Service and Ingress when asked for (nil otherwise).
// Tools that measure against the controller use it, like test/bench/scale.
func DesiredChildren(app *appv1beta1.App, opts Options) (*appsv1.Deployment, *corev1.Service, *networkingv1.Ingress, error) {
	d, err := controller.Typed[appsv1.Deployment](desiredDeployment(app))
	if err != nil {
		return nil, nil, nil, err
	}
	var svc *corev1.Service
	if app.Spec.EnableService {
		if svc, err = controller.Typed[corev1.Service](desiredService(app)); err != nil {
			return nil, nil, nil, err
		}
	}
	var ing *networkingv1.Ingress
	if app.Spec.EnableIngress {
		if ing, err = controller.Typed[networkingv1.Ingress](desiredIngress(app, opts)); err != nil {
			return nil, nil, nil, err
		}
	}
	return d, svc, ing, nil
}
