package ingress

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// DesiredIngress is the Ingress the Service's annotations and opts describe.
// An error means the Service cannot be served as asked and says why.
func DesiredIngress(svc *corev1.Service, opts Options) (*networkingv1.Ingress, error) {
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

	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Name:            svc.Name,
			Namespace:       svc.Namespace,
			Labels:          map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))},
		},
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path:     "/",
						PathType: &pathType,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: svc.Name,
							Port: networkingv1.ServiceBackendPort{Number: svc.Spec.Ports[0].Port},
						}},
					}},
				}},
			}},
		},
	}
	class := opts.DefaultClass
	if v, ok := svc.Annotations[AnnotationClass]; ok {
		class = v
	}
	if class != "" {
		ing.Spec.IngressClassName = &class
	}
	if secret := svc.Annotations[AnnotationTLSSecret]; secret != "" {
		tls := networkingv1.IngressTLS{SecretName: secret}
		if host != "" {
			tls.Hosts = []string{host}
		}
		ing.Spec.TLS = []networkingv1.IngressTLS{tls}
	}
	return ing, nil
}

// needsUpdate reports whether live differs from desired in anything this
// controller sets. Fields it does not set (other labels and annotations, a
// default backend) are not compared and never touched.
func needsUpdate(desired, live *networkingv1.Ingress) bool {
	for k, v := range desired.Labels {
		if live.Labels[k] != v {
			return true
		}
	}
	// A nil class leaves the choice to the cluster; the DefaultIngressClass
	// admission plugin may fill it in, and that is not drift.
	if desired.Spec.IngressClassName != nil &&
		(live.Spec.IngressClassName == nil || *live.Spec.IngressClassName != *desired.Spec.IngressClassName) {
		return true
	}
	if !apiequality.Semantic.DeepEqual(desired.Spec.Rules, live.Spec.Rules) {
		return true
	}
	return !(len(desired.Spec.TLS) == 0 && len(live.Spec.TLS) == 0) &&
		!apiequality.Semantic.DeepEqual(desired.Spec.TLS, live.Spec.TLS)
}

// applyDesired returns a copy of live with every field this controller sets
// taken from desired, and everything else kept.
func applyDesired(desired, live *networkingv1.Ingress) *networkingv1.Ingress {
	updated := live.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	if desired.Spec.IngressClassName != nil {
		updated.Spec.IngressClassName = desired.Spec.IngressClassName
	}
	updated.Spec.Rules = desired.Spec.Rules
	updated.Spec.TLS = desired.Spec.TLS
	return updated
}
