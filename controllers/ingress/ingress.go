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

package ingress

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Annotations on a Service that drive its Ingress.
const (
	// AnnotationEnabled asks for an Ingress; any value but "false" does.
	AnnotationEnabled = "ingress/http"
	// AnnotationHost overrides the host <service>.<namespace>.<default domain>.
	AnnotationHost = "ingress/host"
	// AnnotationClass overrides --ingress-default-class.
	AnnotationClass = "ingress/class"
	// AnnotationPathType is Prefix (the default), Exact or ImplementationSpecific.
	AnnotationPathType = "ingress/path-type"
	// AnnotationTLSSecret names a Secret holding the TLS certificate for the host.
	AnnotationTLSSecret = "ingress/tls-secret"
)

// wantsIngress reports whether the Service asks for an Ingress.
func wantsIngress(svc *corev1.Service) bool {
	v, ok := svc.Annotations[AnnotationEnabled]
	return ok && v != "false"
}

// Reasons of the Warning events of a refused Service.
const (
	ReasonExternalName   = "ExternalNameService"
	ReasonHostRequired   = "IngressHostRequired"
	ReasonHostNotAllowed = "IngressHostNotAllowed"
)

// refusal is why a Service gets no Ingress by design, whatever its
// annotations: the Ingress would route outside its namespace, serve a host
// the administrator did not allow, or catch every request of its class. An
// Ingress made for it earlier is deleted.
type refusal struct{ reason, message string }

func (r *refusal) Error() string { return r.message }

// DesiredIngress is the Ingress the Service's annotations and opts describe,
// as the controller applies it. An error means the Service cannot be served
// as asked and says why.
func DesiredIngress(svc *corev1.Service, opts Options) (*networkingv1.Ingress, error) {
	ing, err := desiredIngress(svc, opts)
	if err != nil {
		return nil, err
	}
	return controller.Typed[networkingv1.Ingress](ing)
}

// desiredIngress is every field of the Service's Ingress this controller
// sets, and no other: a class left to the cluster is not set.
func desiredIngress(svc *corev1.Service, opts Options) (*networkingv1ac.IngressApplyConfiguration, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, &refusal{ReasonExternalName, fmt.Sprintf("the Service is of type ExternalName (%s): an Ingress to it would route outside the namespace", svc.Spec.ExternalName)}
	}
	if len(svc.Spec.Ports) == 0 {
		return nil, fmt.Errorf("service has no ports to route to")
	}
	pathType := networkingv1.PathTypePrefix
	if v, ok := svc.Annotations[AnnotationPathType]; ok {
		switch t := networkingv1.PathType(v); t {
		case networkingv1.PathTypePrefix, networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific:
			pathType = t
		default:
			return nil, fmt.Errorf("annotation %s=%q: must be Prefix, Exact or ImplementationSpecific", AnnotationPathType, v)
		}
	}

	host := svc.Annotations[AnnotationHost]
	if host == "" && opts.DefaultDomain != "" {
		host = fmt.Sprintf("%s.%s.%s", svc.Name, svc.Namespace, strings.TrimPrefix(opts.DefaultDomain, "."))
	}
	if host == "" {
		return nil, &refusal{ReasonHostRequired, fmt.Sprintf("no host: set the annotation %s, or run the manager with --ingress-default-domain; "+
			"an Ingress without a host would catch every request no other Ingress of its class matches", AnnotationHost)}
	}
	if err := allowHost(host, opts.AllowedHosts); err != nil {
		return nil, &refusal{ReasonHostNotAllowed, err.Error()}
	}
	rule := networkingv1ac.IngressRule().
		WithHTTP(networkingv1ac.HTTPIngressRuleValue().WithPaths(networkingv1ac.HTTPIngressPath().
			WithPath("/").
			WithPathType(pathType).
			WithBackend(networkingv1ac.IngressBackend().WithService(networkingv1ac.IngressServiceBackend().
				WithName(svc.Name).
				WithPort(networkingv1ac.ServiceBackendPort().WithNumber(svc.Spec.Ports[0].Port)))))).
		WithHost(host)
	spec := networkingv1ac.IngressSpec().WithRules(rule)
	class := opts.DefaultClass
	if v, ok := svc.Annotations[AnnotationClass]; ok {
		class = v
	}
	if class != "" {
		spec.WithIngressClassName(class)
	}
	if secret := svc.Annotations[AnnotationTLSSecret]; secret != "" {
		spec.WithTLS(networkingv1ac.IngressTLS().WithSecretName(secret).WithHosts(host))
	}
	return networkingv1ac.Ingress(svc.Name, svc.Namespace).
		WithLabels(map[string]string{controller.ManagedByLabel: controller.ManagedByValue}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion("v1").
			WithKind("Service").
			WithName(svc.Name).
			WithUID(svc.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithSpec(spec), nil
}
