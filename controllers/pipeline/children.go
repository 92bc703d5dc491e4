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

package pipeline

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
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
	// LabelStepChild is what a step's Deployment and Service select its
	// pods by; its value is the step's child name (StepName). It is in the
	// Pipeline API's own domain, so only this manager writes it and no pod
	// of another tool (a Helm release, an Argo CD application) matches.
	LabelStepChild = pipelinev1.GroupName + "/step"

	labelName = "app.kubernetes.io/name"
)

// Annotations on a step's pods: the strings the Pipeline's author chose.
// They are not labels, so no Service or NetworkPolicy of another team
// selects the pods by them.
const (
	// AnnotationPipeline is the name of the Pipeline the pod serves.
	AnnotationPipeline = pipelinev1.GroupName + "/pipeline"
	// AnnotationModel is the model the pod serves.
	AnnotationModel = pipelinev1.GroupName + "/model"
)

// AnnotationVolumeUID, on the model claim, is the UID of the volume
// reserved for it.
const AnnotationVolumeUID = pipelinev1.GroupName + "/volume-uid"

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
	volume      *corev1ac.PersistentVolumeApplyConfiguration
	claim       *corev1ac.PersistentVolumeClaimApplyConfiguration
	deployments []*appsv1ac.DeploymentApplyConfiguration // one per step, in step order
	services    []*corev1ac.ServiceApplyConfiguration    // one per step, in step order
}

// childNamespace is where the Pipeline's namespaced children live.
func childNamespace(p *pipelinev1.Pipeline, defaultNamespace string) string {
	return namespaceOr(p.Spec.Namespace, defaultNamespace)
}

// namespaceOr is a Pipeline's spec.namespace, or defaultNamespace when it
// is empty.
func namespaceOr(specNamespace, defaultNamespace string) string {
	if specNamespace != "" {
		return specNamespace
	}
	return defaultNamespace
}

// desiredChildren is every child the Pipeline asks for, in namespace, its
// step pods at level.
func desiredChildren(p *pipelinev1.Pipeline, namespace string, level PodSecurityLevel) children {
	c := children{
		// The claim's UID is known once the claim exists: sync adds it.
		volume: desiredPersistentVolume(p, namespace, ""),
		claim:  desiredPersistentVolumeClaim(p, namespace),
	}
	for i := range p.Spec.Steps {
		c.deployments = append(c.deployments, desiredDeployment(p, namespace, i, level))
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
// sub-directory named after the Pipeline. It is pre-bound to the claim whose
// UID is claimUID (claimRef): by name alone, the binder would bind it to
// any claim of that name, another team's made before it, or one made after
// the Pipeline's is gone. Retain keeps the models when the Pipeline goes.
func desiredPersistentVolume(p *pipelinev1.Pipeline, namespace string, claimUID types.UID) *corev1ac.PersistentVolumeApplyConfiguration {
	name := storageName(p, namespace)
	ms := &p.Spec.ModelStorage
	claimRef := corev1ac.ObjectReference().WithNamespace(namespace).WithName(name)
	if claimUID != "" {
		claimRef.WithUID(claimUID)
	}
	return corev1ac.PersistentVolume(name).
		WithLabels(storageLabels(p)).
		WithOwnerReferences(controllerRef(p)).
		WithSpec(corev1ac.PersistentVolumeSpec().
			WithCapacity(corev1.ResourceList{corev1.ResourceStorage: storageSize(p)}).
			WithAccessModes(corev1.ReadWriteMany).
			WithPersistentVolumeReclaimPolicy(corev1.PersistentVolumeReclaimRetain).
			WithVolumeMode(corev1.PersistentVolumeFilesystem).
			WithClaimRef(claimRef).
			WithCSI(corev1ac.CSIPersistentVolumeSource().
				WithDriver(CSIDriver).
				// csi-driver-nfs's ID format, {server}#{share}#{subDir}#{uuid}:
				// the volume's name as the uuid makes it unique per volume, so
				// the old and the new volume of a storage change differ.
				WithVolumeHandle(strings.Join([]string{ms.NFSServer(), ms.NFSPath(), p.Name, name}, "#")).
				WithVolumeAttributes(map[string]string{
					"server": ms.NFSServer(),
					"share":  ms.NFSPath(),
					"subDir": p.Name,
				})))
}

// desiredPersistentVolumeClaim binds to the volume by name; the empty storage
// class keeps the default class's provisioner away from it.
func desiredPersistentVolumeClaim(p *pipelinev1.Pipeline, namespace string) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	name := storageName(p, namespace)
	return corev1ac.PersistentVolumeClaim(name, namespace).
		WithLabels(storageLabels(p)).
		WithOwnerReferences(controllerRef(p)).
		WithSpec(corev1ac.PersistentVolumeClaimSpec().
			WithAccessModes(corev1.ReadWriteMany).
			WithResources(corev1ac.VolumeResourceRequirements().
				WithRequests(corev1.ResourceList{corev1.ResourceStorage: storageSize(p)})).
			WithVolumeName(name).
			WithStorageClassName("").
			WithVolumeMode(corev1.PersistentVolumeFilesystem))
}

// desiredDeployment runs step i (0-based) on the step's nodes, with the model
// volume at /data and the address of the next step in DST, its pods built
// to pass PodSecurity level. They get no API token: a model server needs
// no access to the API server.
func desiredDeployment(p *pipelinev1.Pipeline, namespace string, i int, level PodSecurityLevel) *appsv1ac.DeploymentApplyConfiguration {
	step := p.Spec.Steps[i]
	name := StepName(p.Name, step.Model)
	port := listenPort(p)

	env := []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName(EnvModelPath).WithValue(ModelMountPath + "/" + step.Model),
		corev1ac.EnvVar().WithName(EnvListenPort).WithValue(strconv.Itoa(int(port))),
	}
	if i == 0 {
		env = append(env, corev1ac.EnvVar().WithName(EnvBegin).WithValue("true"))
	}
	// The last step sends back to the first, closing the ring as the notes do.
	next := p.Spec.Steps[(i+1)%len(p.Spec.Steps)]
	env = append(env, corev1ac.EnvVar().WithName(EnvDST).WithValue(fmt.Sprintf("%s.%s.svc:%d", StepName(p.Name, next.Model), namespace, port)))

	pod := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(podSecurityContext(level)).
		WithVolumes(corev1ac.Volume().
			WithName(volumeName).
			WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(storageName(p, namespace)))).
		WithContainers(corev1ac.Container().
			WithName(containerName).
			WithImage(stepImage(step.Image)).
			WithArgs(containerArgs(step.Args)...).
			WithEnv(env...).
			WithPorts(corev1ac.ContainerPort().WithName(portName).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP)).
			WithVolumeMounts(corev1ac.VolumeMount().WithName(volumeName).WithMountPath(ModelMountPath)).
			WithSecurityContext(containerSecurityContext(level)))
	if affinity := nodeAffinity(stepNodes(step)); affinity != nil {
		pod.WithAffinity(affinity)
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(stepSelector(name))).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(podLabels(p, i)).
			WithAnnotations(map[string]string{AnnotationPipeline: p.Name, AnnotationModel: step.Model}).
			WithSpec(pod))
	// Unset replicas are not ours: an HPA or kubectl scale owns them.
	if step.Replicas != nil {
		spec.WithReplicas(*step.Replicas)
	}
	return appsv1ac.Deployment(name, namespace).
		WithLabels(stepLabels(p, i)).
		WithOwnerReferences(controllerRef(p)).
		WithSpec(spec)
}

// desiredService exposes step i (0-based) on the listen port.
func desiredService(p *pipelinev1.Pipeline, namespace string, i int) *corev1ac.ServiceApplyConfiguration {
	step := p.Spec.Steps[i]
	port := listenPort(p)
	name := StepName(p.Name, step.Model)
	return corev1ac.Service(name, namespace).
		WithLabels(stepLabels(p, i)).
		WithOwnerReferences(controllerRef(p)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(stepSelector(name)).
			WithPorts(corev1ac.ServicePort().
				WithName(portName).
				WithPort(port).
				WithTargetPort(intstr.FromInt32(port)).
				WithProtocol(corev1.ProtocolTCP)))
}

// controllerRef makes the Pipeline the controller of a child (cluster-scoped
// owners may own namespaced dependents).
func controllerRef(p *pipelinev1.Pipeline) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(pipelinev1.SchemeGroupVersion.String()).
		WithKind("Pipeline").
		WithName(p.Name).
		WithUID(p.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// podLabels are the labels of step i's pods: only values the manager
// derives, as Services and NetworkPolicies select pods by label. No
// app.kubernetes.io/instance: that is Helm's release label and Argo CD's
// tracking label, and applying it would fight them.
func podLabels(p *pipelinev1.Pipeline, i int) map[string]string {
	return map[string]string{
		LabelStep:                 strconv.Itoa(i + 1),
		LabelStepChild:            StepName(p.Name, p.Spec.Steps[i].Model),
		controller.ManagedByLabel: controller.ManagedByValue,
	}
}

// stepLabels are the labels of step i's Deployment and Service: the pods'
// and the Pipeline's name, which the controller lists its children by. The
// name is safe there: nothing selects Deployments or Services to grant
// anything, and Pipelines are cluster-scoped, so no other Pipeline has it.
func stepLabels(p *pipelinev1.Pipeline, i int) map[string]string {
	labels := podLabels(p, i)
	labels[LabelPipeline] = pipelineLabelValue(p.Name)
	return labels
}

// stepSelector selects the pods of the step whose children are called
// name, by the one label only this manager writes. It leaves the step's
// position out: a selector is immutable and steps may be reordered.
func stepSelector(name string) map[string]string {
	return map[string]string{LabelStepChild: name}
}

func storageLabels(p *pipelinev1.Pipeline) map[string]string {
	return map[string]string{
		LabelPipeline:             pipelineLabelValue(p.Name),
		labelName:                 storageAppName,
		controller.ManagedByLabel: controller.ManagedByValue,
	}
}

// stepNodes is the step's nodeNames (v1beta1's location, then locations)
// without empty names and duplicates, in the order they are written in.
func stepNodes(step pipelinev1.PipelineStep) []string {
	var nodes []string
	for _, n := range step.NodeNames {
		if n != "" && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// pipelineNodes is every node some step of the Pipeline is pinned to.
func pipelineNodes(p *pipelinev1.Pipeline) []string {
	var nodes []string
	for _, step := range p.Spec.Steps {
		for _, n := range stepNodes(step) {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	return nodes
}

// nodeAffinity requires one of nodes; nil when the step may run anywhere.
func nodeAffinity(nodes []string) *corev1ac.AffinityApplyConfiguration {
	if len(nodes) == 0 {
		return nil
	}
	return corev1ac.Affinity().WithNodeAffinity(corev1ac.NodeAffinity().
		WithRequiredDuringSchedulingIgnoredDuringExecution(corev1ac.NodeSelector().
			WithNodeSelectorTerms(corev1ac.NodeSelectorTerm().
				WithMatchExpressions(corev1ac.NodeSelectorRequirement().
					WithKey(corev1.LabelHostname).
					WithOperator(corev1.NodeSelectorOpIn).
					WithValues(nodes...)))))
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

// stepImage is the image as the allowlist checked it and the kubelet
// resolves it ("nginx" is docker.io/library/nginx): what was checked is what
// runs. One that does not parse is left as written, for the kubelet to
// refuse; with an allowlist it is refused before.
func stepImage(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	return named.String()
}

func listenPort(p *pipelinev1.Pipeline) int32 {
	if p.Spec.ListenPort > 0 {
		return p.Spec.ListenPort
	}
	return defaultListenPort
}

func storageSize(p *pipelinev1.Pipeline) resource.Quantity {
	if s := p.Spec.ModelStorage.Size; s != nil {
		return s.DeepCopy()
	}
	return defaultStorageSize.DeepCopy()
}

// stepHashLen is the length of the hash that ends a step's child name: 13
// base32 characters, 65 bits of SHA-256. Two (pipeline, model) pairs with
// the same readable part meet on one name by chance only among billions of
// such pairs, and on purpose only after some 2^64 hashes.
const stepHashLen = 13

// lowerBase32 encodes with the characters of a DNS label.
var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// StepName names the Deployment and Service of the step serving model in
// the Pipeline called pipelineName: a DNS-1035 label of at most 63
// characters, <pipeline>-<model> (dots as dashes, cut to fit) for the
// reader, then a hash of the pair. <pipeline>-<model> alone is ambiguous
// (Pipeline a-b's model c and Pipeline a's model b-c are both a-b-c), so the
// hash covers an encoding of the pair that is not: the pipeline name's
// length, then both names.
func StepName(pipelineName, model string) string {
	prefix := strings.ReplaceAll(pipelineName+"-"+model, ".", "-")
	if prefix[0] < 'a' || prefix[0] > 'z' {
		prefix = "p" + prefix
	}
	if maxPrefix := validation.DNS1035LabelMaxLength - stepHashLen - 1; len(prefix) > maxPrefix {
		prefix = strings.TrimRight(prefix[:maxPrefix], "-")
	}
	sum := sha256.Sum256([]byte(strconv.Itoa(len(pipelineName)) + ":" + pipelineName + model))
	return prefix + "-" + lowerBase32.EncodeToString(sum[:])[:stepHashLen]
}

// storageName names the volume and its claim: <pipeline>-models-<hash>. The
// hash covers everything the volume's immutable spec and the claim's binding
// depend on, so that a change of namespace, server, share or size gets a new
// volume and claim instead of an update the API server would refuse.
func storageName(p *pipelinev1.Pipeline, namespace string) string {
	ms := &p.Spec.ModelStorage
	size := storageSize(p)
	// The type as v1beta1 spells it, wherever it was written there: the
	// name stays the same in either version.
	var storageType string
	if ms.NFS != nil {
		storageType = nfsStorageType
	}
	return dnsLabel(p.Name+"-models", strings.Join([]string{
		namespace, storageType, ms.NFSServer(), ms.NFSPath(), size.String(),
	}, "\x00"))
}

// nfsStorageType is v1beta1's modelStorage type of an NFS share.
const nfsStorageType = "nfs"

// nameHashLen is the length of the hex hash suffix of generated names: 64
// bits, so that nobody can search for a collision with another Pipeline's.
const nameHashLen = 16

// labelHashLen is the length of the hex hash suffix of a long Pipeline
// name's label value. The label only filters children the Pipeline already
// controls (unwanted.go), so a collision gains nothing; changing it would
// leave children labelled before unrecognised.
const labelHashLen = 8

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
	maxPrefix := validation.DNS1035LabelMaxLength - nameHashLen - 1
	if len(name) > maxPrefix {
		name = strings.TrimRight(name[:maxPrefix], "-")
	}
	return name + "-" + hexHash(base+"\x00"+salt, nameHashLen)
}

// pipelineLabelValue is the Pipeline's name, cut and hashed when it is
// longer than a label value may be.
func pipelineLabelValue(name string) string {
	if len(name) <= validation.LabelValueMaxLength {
		return name
	}
	prefix := strings.TrimRight(name[:validation.LabelValueMaxLength-labelHashLen-1], "-.")
	return prefix + "-" + hexHash(name, labelHashLen)
}

// hexHash is the first n hex digits of the SHA-256 of s.
func hexHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// DesiredChildren returns the objects the controller creates for p in
// namespace: the model-storage volume and claim, and per step (in step
// order) a Deployment and a Service, with the default flags in a namespace
// not enforcing restricted. The scale benchmark's raw measurement creates
// exactly these.
func DesiredChildren(p *pipelinev1.Pipeline, namespace string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim, []*appsv1.Deployment, []*corev1.Service) {
	c := desiredChildren(p, namespace, PodSecurityBaseline)
	deployments := make([]*appsv1.Deployment, len(c.deployments))
	services := make([]*corev1.Service, len(c.services))
	for i := range c.deployments {
		deployments[i] = mustTyped[appsv1.Deployment](c.deployments[i])
		services[i] = mustTyped[corev1.Service](c.services[i])
	}
	return mustTyped[corev1.PersistentVolume](c.volume), mustTyped[corev1.PersistentVolumeClaim](c.claim), deployments, services
}

// mustTyped is controller.Typed for apply configurations of the type itself,
// which always convert.
func mustTyped[T any](applyConfiguration any) *T {
	obj, err := controller.Typed[T](applyConfiguration)
	if err != nil {
		panic(err)
	}
	return obj
}
