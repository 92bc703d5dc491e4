package app

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(childLabels(app)).
		WithOwnerReferences(controllerRef(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(desiredReplicas(app)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(childLabels(app)).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName(ContainerName).
					WithImage(app.Spec.Image).
					// The protocol is part of the list key: server-side apply
					// needs it even though the server would default it.
					WithPorts(corev1ac.ContainerPort().
						WithContainerPort(portOf(app)).
						WithProtocol(corev1.ProtocolTCP))))))
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

// typed converts an apply configuration into the object it describes, with
// exactly the fields it sets: the object to create, and the one to compare
// the live object with.
func typed[T any](applyConfiguration any) (*T, error) {
	data, err := json.Marshal(applyConfiguration)
	if err != nil {
		return nil, fmt.Errorf("encoding the apply configuration: %w", err)
	}
	obj := new(T)
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("decoding the apply configuration into %T: %w", obj, err)
	}
	return obj, nil
}

// The drift checks below compare only the fields the desired objects set.
// Everything else on the live object is defaulted by the server (strategy,
// revisionHistoryLimit, terminationMessagePath, clusterIP, sessionAffinity,
// ipFamilies...) or set by someone else, and is never a reason to write.

// hasLabels reports whether live carries every label of want.
func hasLabels(live, want map[string]string) bool {
	for k, v := range want {
		if lv, ok := live[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

func findContainer(containers []corev1.Container, name string) (int, *corev1.Container) {
	for i := range containers {
		if containers[i].Name == name {
			return i, &containers[i]
		}
	}
	return -1, nil
}

// deploymentDrifted reports whether live differs from want in a field this
// controller sets. The container's port list is checked by
// containerPortsDiffer.
func deploymentDrifted(want, live *appsv1.Deployment) bool {
	if !hasLabels(live.Labels, want.Labels) ||
		ptr.Deref(live.Spec.Replicas, defaultReplicas) != ptr.Deref(want.Spec.Replicas, defaultReplicas) ||
		!apiequality.Semantic.DeepEqual(live.Spec.Selector, want.Spec.Selector) ||
		!hasLabels(live.Spec.Template.Labels, want.Spec.Template.Labels) {
		return true
	}
	_, wantC := findContainer(want.Spec.Template.Spec.Containers, ContainerName)
	_, liveC := findContainer(live.Spec.Template.Spec.Containers, ContainerName)
	return liveC == nil || liveC.Image != wantC.Image
}

type portKey struct {
	port     int32
	protocol corev1.Protocol
}

// containerPortsDiffer reports whether the live container's ports are not
// exactly the desired ones. Apply cannot fix that alone: it only adds its
// own list entries, and the entries written at create time, or re-keyed by
// a hand edit, belong to other field managers.
func containerPortsDiffer(want, live *appsv1.Deployment) bool {
	_, wantC := findContainer(want.Spec.Template.Spec.Containers, ContainerName)
	_, liveC := findContainer(live.Spec.Template.Spec.Containers, ContainerName)
	if liveC == nil {
		return false // apply adds the whole container
	}
	keys := func(ports []corev1.ContainerPort) map[portKey]bool {
		m := map[portKey]bool{}
		for _, p := range ports {
			m[portKey{p.ContainerPort, p.Protocol}] = true
		}
		return m
	}
	return !apiequality.Semantic.DeepEqual(keys(wantC.Ports), keys(liveC.Ports))
}

// containerPortsPatch is a JSON patch setting the live container's ports to
// the desired ones, valid only for the live object's resourceVersion.
func containerPortsPatch(want, live *appsv1.Deployment) ([]byte, error) {
	_, wantC := findContainer(want.Spec.Template.Spec.Containers, ContainerName)
	i, liveC := findContainer(live.Spec.Template.Spec.Containers, ContainerName)
	if liveC == nil {
		return nil, fmt.Errorf("deployment %s has no container %q", live.Name, ContainerName)
	}
	return replacePatch(live.ResourceVersion, fmt.Sprintf("/spec/template/spec/containers/%d/ports", i), wantC.Ports)
}

// serviceDrifted reports whether live differs from want in a field this
// controller sets. The set of ports is checked by servicePortsDiffer.
func serviceDrifted(want, live *corev1.Service) bool {
	if !hasLabels(live.Labels, want.Labels) ||
		live.Spec.Type != want.Spec.Type ||
		!apiequality.Semantic.DeepEqual(live.Spec.Selector, want.Spec.Selector) {
		return true
	}
	for _, wp := range want.Spec.Ports {
		found := false
		for _, lp := range live.Spec.Ports {
			if lp.Port == wp.Port && lp.Protocol == wp.Protocol {
				found = lp.TargetPort == wp.TargetPort
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// servicePortsDiffer reports whether the live Service exposes other ports
// than the desired ones. The App defines the Service's whole port list: a
// second, unnamed port would make the Service invalid.
func servicePortsDiffer(want, live *corev1.Service) bool {
	keys := func(ports []corev1.ServicePort) map[portKey]bool {
		m := map[portKey]bool{}
		for _, p := range ports {
			m[portKey{p.Port, p.Protocol}] = true
		}
		return m
	}
	return !apiequality.Semantic.DeepEqual(keys(want.Spec.Ports), keys(live.Spec.Ports))
}

// servicePortsPatch is a JSON patch setting the live Service's ports to the
// desired ones, valid only for the live object's resourceVersion.
func servicePortsPatch(want, live *corev1.Service) ([]byte, error) {
	return replacePatch(live.ResourceVersion, "/spec/ports", want.Spec.Ports)
}

// replacePatch is a JSON patch that replaces path with value if, and only
// if, the object still has resourceVersion.
func replacePatch(resourceVersion, path string, value any) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	return json.Marshal([]op{
		{Op: "test", Path: "/metadata/resourceVersion", Value: resourceVersion},
		{Op: "replace", Path: path, Value: value},
	})
}

// ingressDrifted reports whether live differs from want in a field this
// controller sets.
func ingressDrifted(want, live *networkingv1.Ingress) bool {
	if !hasLabels(live.Labels, want.Labels) {
		return true
	}
	// Without a configured class the cluster chooses: the DefaultIngressClass
	// admission plugin may fill one in, and that is not drift.
	if want.Spec.IngressClassName != nil &&
		(live.Spec.IngressClassName == nil || *live.Spec.IngressClassName != *want.Spec.IngressClassName) {
		return true
	}
	// Rules are an atomic list: compared, and applied, whole.
	return !apiequality.Semantic.DeepEqual(want.Spec.Rules, live.Spec.Rules)
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
	d, err := typed[appsv1.Deployment](desiredDeployment(app))
	if err != nil {
		return nil, nil, nil, err
	}
	var svc *corev1.Service
	if app.Spec.EnableService {
		if svc, err = typed[corev1.Service](desiredService(app)); err != nil {
			return nil, nil, nil, err
		}
	}
	var ing *networkingv1.Ingress
	if app.Spec.EnableIngress {
		if ing, err = typed[networkingv1.Ingress](desiredIngress(app, opts)); err != nil {
			return nil, nil, nil, err
		}
	}
	return d, svc, ing, nil
}
