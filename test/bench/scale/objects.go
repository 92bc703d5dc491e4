package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// ingressDomain gives the Apps' Ingresses a host, as in production; the
// managers run with --app-ingress-domain set to it.
const ingressDomain = "apps.example.com"

// benchLabel marks the cluster-scoped objects of this benchmark (Pipelines)
// with the phase that created them, so that each phase finds its own.
const benchLabel = "bench.ndsl.cn/phase"

// newApp is the i-th App of a phase: a Deployment with replicas pods, a
// Service and an Ingress.
func newApp(i int, replicas int32) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i)},
		Spec: appv1beta1.AppSpec{
			Image:         "nginx:1.27",
			Replicas:      ptr.To(replicas),
			EnableService: true,
			EnableIngress: true,
			Port:          80,
		},
	}
}

// newPipeline is the i-th Pipeline of a phase: steps steps, one replica
// each, pinned round-robin to nodes, children in namespace.
func newPipeline(phase string, i, steps int, namespace string, nodes []string) *pipelinev1beta1.Pipeline {
	p := &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("%s-pl-%04d", phase, i),
			Labels: map[string]string{benchLabel: phase},
		},
		Spec: pipelinev1beta1.PipelineSpec{
			ListenPort: 9080,
			Namespace:  namespace,
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: &pipelinev1beta1.CSIParameter{Server: "192.0.2.10", Share: "/exports/models"},
			},
		},
	}
	for s := range steps {
		p.Spec.Steps = append(p.Spec.Steps, pipelinev1beta1.PipelineStep{
			Model:     fmt.Sprintf("model-%d", s+1),
			Image:     "nginx:1.27",
			Locations: []string{nodes[(i*steps+s)%len(nodes)]},
			Replicas:  ptr.To[int32](1),
			Args:      map[string]string{"listenPort": "9080"},
		})
	}
	return p
}

// The raw measurement creates what the Pipeline controller would create.
// Its builders are not exported, so these mirror controllers/pipeline's
// children.go field for field (names, labels, owner, env, affinity, volume);
// the benchmark prints the encoded sizes of both, so a drift shows.

// pipelineChildren are the PersistentVolume, claim, and per step a
// Deployment and Service of p (created, so it has a UID).
type pipelineChildren struct {
	volume      *corev1.PersistentVolume
	claim       *corev1.PersistentVolumeClaim
	deployments []*appsv1.Deployment
	services    []*corev1.Service
}

func rawPipelineChildren(p *pipelinev1beta1.Pipeline) pipelineChildren {
	ns := p.Spec.Namespace
	port := p.Spec.ListenPort
	size := resource.MustParse("10Gi")
	if p.Spec.ModelStorage.Size != nil {
		size = p.Spec.ModelStorage.Size.DeepCopy()
	}
	csi := ptr.Deref(p.Spec.ModelStorage.CSIParameter, pipelinev1beta1.CSIParameter{})
	storage := p.Name + "-models-" + shortHash(p.Name+"-models\x00"+strings.Join([]string{
		ns, string(p.Spec.ModelStorage.Type), csi.Server, csi.Share, size.String()}, "\x00"))
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(p, pipelinev1beta1.SchemeGroupVersion.WithKind("Pipeline"))}
	storageLabels := map[string]string{
		"pipeline":                   p.Name,
		"app.kubernetes.io/name":     "model-storage",
		"app.kubernetes.io/instance": storage,
		controller.ManagedByLabel:    controller.ManagedByValue,
	}
	c := pipelineChildren{
		volume: &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: storage, Labels: storageLabels, OwnerReferences: owner},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: storage},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver:           "nfs.csi.k8s.io",
					VolumeHandle:     strings.Join([]string{csi.Server, csi.Share, p.Name}, "#"),
					VolumeAttributes: map[string]string{"server": csi.Server, "share": csi.Share, "subDir": p.Name},
				}},
			},
		},
		claim: &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: storage, Namespace: ns, Labels: storageLabels, OwnerReferences: owner},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				VolumeName:       storage,
				StorageClassName: ptr.To(""),
				VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			},
		},
	}
	steps := p.Spec.Steps
	for i, step := range steps {
		name := p.Name + "-" + step.Model
		labels := map[string]string{
			"pipeline":                   p.Name,
			"step":                       strconv.Itoa(i + 1),
			"app.kubernetes.io/name":     step.Model,
			"app.kubernetes.io/instance": name,
			controller.ManagedByLabel:    controller.ManagedByValue,
		}
		selector := map[string]string{"pipeline": p.Name, "app.kubernetes.io/instance": name}
		env := []corev1.EnvVar{
			{Name: "MODEL_PATH", Value: "/data/" + step.Model},
			{Name: "LISTEN_PORT", Value: strconv.Itoa(int(port))},
		}
		if i == 0 {
			env = append(env, corev1.EnvVar{Name: "BEGIN", Value: "true"})
		}
		next := steps[(i+1)%len(steps)]
		env = append(env, corev1.EnvVar{Name: "DST", Value: fmt.Sprintf("%s-%s.%s.svc:%d", p.Name, next.Model, ns, port)})
		var args []string
		for k, v := range step.Args { // one arg in this benchmark: no order to keep
			args = append(args, fmt.Sprintf("--%s=%s", k, v))
		}
		c.deployments = append(c.deployments, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, OwnerReferences: owner},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(ptr.Deref(step.Replicas, 1)),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
								NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
									Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: step.Locations,
								}}}},
							},
						}},
						Volumes: []corev1.Volume{{Name: "models", VolumeSource: corev1.VolumeSource{
							PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: storage},
						}}},
						Containers: []corev1.Container{{
							Name:         "model-server",
							Image:        step.Image,
							Args:         args,
							Env:          env,
							Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
							VolumeMounts: []corev1.VolumeMount{{Name: "models", MountPath: "/data"}},
						}},
					},
				},
			},
		})
		c.services = append(c.services, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, OwnerReferences: owner},
			Spec: corev1.ServiceSpec{
				Selector: selector,
				Ports: []corev1.ServicePort{{
					Name: "http", Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP,
				}},
			},
		})
	}
	return c
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

// newIngressService is the i-th Service of the Ingress scenario: headless
// (no ClusterIP to allocate, see docs/benchmarks.md), without a selector
// (no EndpointSlices for kube-controller-manager to write), asking for an
// Ingress.
func newIngressService(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("svc-%05d", i),
			Annotations: map[string]string{ingress.AnnotationEnabled: "true"},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// rawIngress mirrors what the Ingress controller creates for svc without a
// default domain or class (controllers/ingress's desiredIngress).
func rawIngress(svc *corev1.Service) *networkingv1.Ingress {
	pathType := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Name:            svc.Name,
			Namespace:       svc.Namespace,
			Labels:          map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))},
		},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
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
		}}},
	}
}

// benchNode is a kwok-managed Node with room for pods pods.
func benchNode(name string, pods int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo:    corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake"},
		},
	}
}
