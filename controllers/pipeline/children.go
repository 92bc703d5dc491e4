package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// Labels on every child of a Pipeline.
const (
	// LabelPipeline names the Pipeline a child belongs to (cut and hashed
	// when the name is too long for a label value). The controller lists
	// children by it.
	LabelPipeline = "pipeline"
	// LabelStep is the 1-based position of a step's Deployment and Service.
	LabelStep = "step"

	labelName     = "app.kubernetes.io/name"
	labelInstance = "app.kubernetes.io/instance"
)

// The fixed parts of the children.
const (
	// CSIDriver is the CSI driver of the model volume.
	CSIDriver = "nfs.csi.k8s.io"
	// ModelMountPath is where every step sees the model volume.
	ModelMountPath = "/data"

	containerName = "model-server"
	volumeName    = "models"
	portName      = "http"

	storageAppName = "model-storage"

	defaultListenPort int32 = 9080
)

var defaultStorageSize = resource.MustParse("10Gi")

// Names of the environment variables every step gets.
const (
	EnvModelPath  = "MODEL_PATH"
	EnvListenPort = "LISTEN_PORT"
	EnvBegin      = "BEGIN"
	EnvDST        = "DST"
)

// children is the part of the world one Pipeline asks for.
type children struct {
	namespace   string
	volume      *corev1.PersistentVolume
	claim       *corev1.PersistentVolumeClaim
	deployments []*appsv1.Deployment // one per step, in step order
	services    []*corev1.Service    // one per step, in step order
}

// targetNamespace is where the Pipeline's namespaced children live.
func targetNamespace(p *pipelinev1beta1.Pipeline, defaultNamespace string) string {
	if p.Spec.Namespace != "" {
		return p.Spec.Namespace
	}
	return defaultNamespace
}

// desiredChildren is every child the Pipeline asks for, in namespace.
func desiredChildren(p *pipelinev1beta1.Pipeline, namespace string) children {
	c := children{
		namespace: namespace,
		volume:    desiredPersistentVolume(p, namespace),
		claim:     desiredPersistentVolumeClaim(p, namespace),
	}
	for i := range p.Spec.Steps {
		c.deployments = append(c.deployments, desiredDeployment(p, namespace, i))
		c.services = append(c.services, desiredService(p, namespace, i))
	}
	return c
}

// desiredNamespace is the namespace the controller creates when it is missing.
// It has no owner: a namespace may hold more than one Pipeline's children and
// other things, so the controller never deletes one.
func desiredNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
	}}
}

// desiredPersistentVolume is the NFS volume holding the models, the share's
// sub-directory named after the Pipeline. It is pre-bound to the claim
// (claimRef) so that no other claim can take it, and Retain keeps the models
// when the Pipeline goes.
func desiredPersistentVolume(p *pipelinev1beta1.Pipeline, namespace string) *corev1.PersistentVolume {
	name := storageName(p, namespace)
	csi := ptr.Deref(p.Spec.ModelStorage.CSIParameter, pipelinev1beta1.CSIParameter{})
	return &corev1.PersistentVolume{
		ObjectMeta: childMeta(p, "", name, storageLabels(p, name)),
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: storageSize(p)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			ClaimRef:                      &corev1.ObjectReference{Namespace: namespace, Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: CSIDriver,
				// The driver's handle format, {server}#{share}#{subDir}: unique per Pipeline.
				VolumeHandle: strings.Join([]string{csi.Server, csi.Share, p.Name}, "#"),
				VolumeAttributes: map[string]string{
					"server": csi.Server,
					"share":  csi.Share,
					"subDir": p.Name,
				},
			}},
		},
	}
}

// desiredPersistentVolumeClaim binds to the volume by name; the empty storage
// class keeps the default class's provisioner away from it.
func desiredPersistentVolumeClaim(p *pipelinev1beta1.Pipeline, namespace string) *corev1.PersistentVolumeClaim {
	name := storageName(p, namespace)
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: childMeta(p, namespace, name, storageLabels(p, name)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: storageSize(p)}},
			VolumeName:       name,
			StorageClassName: ptr.To(""),
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
		},
	}
}

// desiredDeployment runs step i (0-based) on the step's nodes, with the model
// volume at /data and the address of the next step in DST.
func desiredDeployment(p *pipelinev1beta1.Pipeline, namespace string, i int) *appsv1.Deployment {
	step := p.Spec.Steps[i]
	name := stepName(p, step.Model)
	labels := stepLabels(p, i)
	port := listenPort(p)

	env := []corev1.EnvVar{
		{Name: EnvModelPath, Value: ModelMountPath + "/" + step.Model},
		{Name: EnvListenPort, Value: strconv.Itoa(int(port))},
	}
	if i == 0 {
		env = append(env, corev1.EnvVar{Name: EnvBegin, Value: "true"})
	}
	// The last step sends back to the first, closing the ring as the notes do.
	next := p.Spec.Steps[(i+1)%len(p.Spec.Steps)]
	env = append(env, corev1.EnvVar{Name: EnvDST, Value: fmt.Sprintf("%s.%s.svc:%d", stepName(p, next.Model), namespace, port)})

	d := &appsv1.Deployment{
		ObjectMeta: childMeta(p, namespace, name, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(step.Replicas, 1)),
			Selector: &metav1.LabelSelector{MatchLabels: stepSelector(p, step.Model)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: nodeAffinity(stepLocations(step)),
					Volumes: []corev1.Volume{{
						Name: volumeName,
						VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
							ClaimName: storageName(p, namespace),
						}},
					}},
					Containers: []corev1.Container{{
						Name:         containerName,
						Image:        step.Image,
						Args:         containerArgs(step.Args),
						Env:          env,
						Ports:        []corev1.ContainerPort{{Name: portName, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
						VolumeMounts: []corev1.VolumeMount{{Name: volumeName, MountPath: ModelMountPath}},
					}},
				},
			},
		},
	}
	return d
}

// desiredService exposes step i (0-based) on the listen port.
func desiredService(p *pipelinev1beta1.Pipeline, namespace string, i int) *corev1.Service {
	step := p.Spec.Steps[i]
	port := listenPort(p)
	return &corev1.Service{
		ObjectMeta: childMeta(p, namespace, stepName(p, step.Model), stepLabels(p, i)),
		Spec: corev1.ServiceSpec{
			Selector: stepSelector(p, step.Model),
			Ports: []corev1.ServicePort{{
				Name:       portName,
				Port:       port,
				TargetPort: intstr.FromInt32(port),
				Protocol:   corev1.ProtocolTCP,
			}},
		},
	}
}

// childMeta is the metadata every child shares: name, labels and a
// controller reference to the Pipeline (cluster-scoped owners may own
// namespaced dependents).
func childMeta(p *pipelinev1beta1.Pipeline, namespace, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(p, pipelinev1beta1.SchemeGroupVersion.WithKind("Pipeline"))},
	}
}

// stepLabels are the labels of step i's Deployment, Service and pods.
func stepLabels(p *pipelinev1beta1.Pipeline, i int) map[string]string {
	model := p.Spec.Steps[i].Model
	return map[string]string{
		LabelPipeline:             pipelineLabelValue(p.Name),
		LabelStep:                 strconv.Itoa(i + 1),
		labelName:                 model,
		labelInstance:             stepName(p, model),
		controller.ManagedByLabel: controller.ManagedByValue,
	}
}

// stepSelector selects a step's pods. It leaves the step's position out:
// a selector is immutable and steps may be reordered.
func stepSelector(p *pipelinev1beta1.Pipeline, model string) map[string]string {
	return map[string]string{
		LabelPipeline: pipelineLabelValue(p.Name),
		labelInstance: stepName(p, model),
	}
}

func storageLabels(p *pipelinev1beta1.Pipeline, name string) map[string]string {
	return map[string]string{
		LabelPipeline:             pipelineLabelValue(p.Name),
		labelName:                 storageAppName,
		labelInstance:             name,
		controller.ManagedByLabel: controller.ManagedByValue,
	}
}

// stepLocations merges location and locations, dropping empty names and
// duplicates and keeping the order they are written in.
func stepLocations(step pipelinev1beta1.PipelineStep) []string {
	var nodes []string
	for _, n := range append([]string{step.Location}, step.Locations...) {
		if n != "" && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// pipelineNodes is every node some step of the Pipeline is pinned to.
func pipelineNodes(p *pipelinev1beta1.Pipeline) []string {
	var nodes []string
	for _, step := range p.Spec.Steps {
		for _, n := range stepLocations(step) {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	return nodes
}

// nodeAffinity requires one of nodes; nil when the step may run anywhere.
func nodeAffinity(nodes []string) *corev1.Affinity {
	if len(nodes) == 0 {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key:      corev1.LabelHostname,
					Operator: corev1.NodeSelectorOpIn,
					Values:   nodes,
				}},
			}},
		},
	}}
}

// containerArgs turns args into --key=value flags in sorted key order, so
// that the same map always gives the same pod template.
func containerArgs(args map[string]string) []string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("--%s=%s", k, args[k]))
	}
	return out
}

func listenPort(p *pipelinev1beta1.Pipeline) int32 {
	if p.Spec.ListenPort > 0 {
		return p.Spec.ListenPort
	}
	return defaultListenPort
}

func storageSize(p *pipelinev1beta1.Pipeline) resource.Quantity {
	if s := p.Spec.ModelStorage.Size; s != nil {
		return s.DeepCopy()
	}
	return defaultStorageSize.DeepCopy()
}

// stepName names a step's Deployment and Service: <pipeline>-<model>.
func stepName(p *pipelinev1beta1.Pipeline, model string) string {
	return dnsLabel(p.Name+"-"+model, "")
}

// storageName names the volume and its claim: <pipeline>-models-<hash>. The
// hash covers everything the volume's immutable spec and the claim's binding
// depend on, so that a change of namespace, server, share or size gets a new
// volume and claim instead of an update the API server would refuse.
func storageName(p *pipelinev1beta1.Pipeline, namespace string) string {
	csi := ptr.Deref(p.Spec.ModelStorage.CSIParameter, pipelinev1beta1.CSIParameter{})
	size := storageSize(p)
	return dnsLabel(p.Name+"-models", strings.Join([]string{
		namespace, string(p.Spec.ModelStorage.Type), csi.Server, csi.Share, size.String(),
	}, "\x00"))
}

// hashLen is the length of the hex hash suffix of generated names.
const hashLen = 8

// dnsLabel turns base into a DNS-1035 label (what a Service name must be):
// dots become dashes, a leading digit gets a "p" in front, and a name too
// long is cut. Whenever base had to change, and whenever salt is not empty, a
// hash of base and salt is appended, so that different inputs never meet on
// one name.
func dnsLabel(base, salt string) string {
	name := strings.ReplaceAll(base, ".", "-")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "p" + name
	}
	if name == base && salt == "" && len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	maxPrefix := validation.DNS1035LabelMaxLength - hashLen - 1
	if len(name) > maxPrefix {
		name = strings.TrimRight(name[:maxPrefix], "-")
	}
	return name + "-" + shortHash(base+"\x00"+salt)
}

// pipelineLabelValue is the Pipeline's name, cut and hashed when it is
// longer than a label value may be.
func pipelineLabelValue(name string) string {
	if len(name) <= validation.LabelValueMaxLength {
		return name
	}
	prefix := strings.TrimRight(name[:validation.LabelValueMaxLength-hashLen-1], "-.")
	return prefix + "-" + shortHash(name)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// DesiredChildren returns the objects the controller creates for p in
// namespace: the model-storage volume and claim, and per step (in step
// order) a Deployment and a Service. The scale benchmark's raw measurement
// creates exactly these.
func DesiredChildren(p *pipelinev1beta1.Pipeline, namespace string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim, []*appsv1.Deployment, []*corev1.Service) {
	c := desiredChildren(p, namespace)
	return c.volume, c.claim, c.deployments, c.services
}
