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

package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:unservedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=dip,categories=ndsl
// +kubebuilder:printcolumn:name="Steps.model",type=string,JSONPath=`.status.models`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="DetailPhase",type=string,JSONPath=`.status.detailPhase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:deprecatedversion:warning="distri-infer.ndsl.cn/v1beta1 Pipeline is deprecated; use distri-infer.ndsl.cn/v1, the stored version; v1beta1 needs the manager's conversion webhook"

// Pipeline is a chain of model-serving steps, each a Deployment and a
// Service, that share one persistent volume holding the models.
type Pipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the Pipeline.
	Spec PipelineSpec `json:"spec"`

	// Status is the state of the Pipeline as last observed by the controller.
	// +optional
	Status PipelineStatus `json:"status,omitempty"`
}

// PipelineSpec is the desired state of a Pipeline.
type PipelineSpec struct {
	// Steps are the stages of the pipeline, in order. Their models must be
	// unique. The cap on their number keeps the cost of the uniqueness rule
	// within the API server's CEL budget.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(s, self.exists_one(t, t.model == s.model))",message="step models must be unique"
	// +listType=atomic
	// +required
	Steps []PipelineStep `json:"steps"`

	// ListenPort is the port every step's container listens on and its
	// Service exposes.
	// +kubebuilder:default=9080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	ListenPort int32 `json:"listenPort,omitempty"`

	// Namespace is where the steps' Deployments and Services and the
	// storage claim are created. Empty means the controller's default.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// ModelStorage is the volume the steps read their models from. Every
	// step mounts its sub-directory named after the Pipeline (for nfs,
	// <share>/<pipeline name> on the server, which must exist) at /data and
	// reads its model from /data/<model>.
	// +required
	ModelStorage ModelStorage `json:"modelStorage"`

	// Status is not part of the API: the design notes' sample carries a
	// spec.status, which is tolerated and ignored (with an admission
	// warning). The Pipeline's status is .status.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Status *runtime.RawExtension `json:"status,omitempty"`
}

// PipelineStep is one stage of a Pipeline: a model served by an image.
type PipelineStep struct {
	// Model names the model this step serves; with the Pipeline's name
	// it names the step's Deployment and Service too
	// (<pipeline>-<model>-<hash of both>), so it must be a DNS-1123 label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Model string `json:"model"`

	// Image is the container image serving the model.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// Location is the name of a node to run the step on.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Location string `json:"location,omitempty"`

	// Locations are the names of nodes the step may run on.
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Locations []string `json:"locations,omitempty"`

	// Replicas is the number of pods serving the step. Unset, the step's
	// Deployment starts with 1 and its replicas are left to whoever scales
	// it (kubectl scale, an HPA); set, the controller keeps it at this.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"` // a pointer, so that an explicit 0 is not taken for unset

	// Args are passed to the step's container.
	// +optional
	Args map[string]string `json:"args,omitempty"`
}

// StorageType is the kind of volume that holds the models.
// +kubebuilder:validation:Enum=nfs
type StorageType string

// StorageTypeNFS is an NFS share mounted through the NFS CSI driver.
const StorageTypeNFS StorageType = "nfs"

// Keys of ModelStorage.CSIParameter that mean something to the controller.
const (
	// CSIParameterType is the storage type, when given inside csiParameter
	// as the design notes do.
	CSIParameterType = "type"
	// CSIParameterServer is the NFS server's host name or IP address.
	CSIParameterServer = "server"
	// CSIParameterShare is the exported path on the NFS server.
	CSIParameterShare = "share"
)

// The type may sit beside csiParameter or, as in the design notes, inside it;
// the rules below check the type wherever it is.
// +kubebuilder:validation:XValidation:rule="has(self.type) || (has(self.csiParameter) && 'type' in self.csiParameter)",message="modelStorage needs a type: set modelStorage.type or modelStorage.csiParameter.type (only nfs is supported)"
// +kubebuilder:validation:XValidation:rule="!has(self.csiParameter) || !('type' in self.csiParameter) || self.csiParameter['type'] == 'nfs'",message="modelStorage.csiParameter.type must be nfs, the only supported storage type"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || !has(self.csiParameter) || !('type' in self.csiParameter) || self.csiParameter['type'] == self.type",message="modelStorage.type and modelStorage.csiParameter.type disagree"
// +kubebuilder:validation:XValidation:rule="has(self.csiParameter) && 'server' in self.csiParameter && self.csiParameter['server'] != '' && 'share' in self.csiParameter && self.csiParameter['share'] != ''",message="modelStorage of type nfs requires csiParameter.server and csiParameter.share (the NFS server and its exported path)"

// ModelStorage describes the volume that holds the models.
type ModelStorage struct {
	// Type is the kind of volume; it may be given inside csiParameter
	// instead, as the design notes do.
	// +optional
	Type StorageType `json:"type,omitempty"`

	// CSIParameter locates the volume, as string parameters: for nfs,
	// server and share (both required), and optionally type. Other keys are
	// accepted and ignored, with an admission warning.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	CSIParameter map[string]string `json:"csiParameter,omitempty"`

	// Size is the capacity of the persistent volume and its claim.
	// +kubebuilder:default="10Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
}

// PipelineStatus is the observed state of a Pipeline.
type PipelineStatus struct {
	// ObservedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Models are the steps' models in step order, comma-separated, for the
	// printer column (a column shows only the first of a list's values).
	// +optional
	Models string `json:"models,omitempty"`

	// Phase sums the conditions up in one word, as the design notes ask:
	// Running when Ready, Failed when Degraded, Pending otherwise.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// DetailPhase is the phase of each child, as the design notes ask.
	// +optional
	DetailPhase *DetailPhase `json:"detailPhase,omitempty"`

	// StepCount is the number of steps in the observed generation's spec.
	// +optional
	StepCount int32 `json:"stepCount,omitempty"`

	// Conditions are the latest observations of the Pipeline's state, one per type.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Steps are the observed states of the steps, one per model.
	// +listType=map
	// +listMapKey=model
	// +optional
	Steps []StepStatus `json:"steps,omitempty"`

	// Storage is the observed state of the model volume.
	// +optional
	Storage *StorageStatus `json:"storage,omitempty"`
}

// Phase is the one-word state of a Pipeline.
type Phase string

// Phases of a Pipeline: v1's, which the controller writes.
const (
	PhasePending = Phase(pipelinev1.PhasePending)
	PhaseRunning = Phase(pipelinev1.PhaseRunning)
	PhaseFailed  = Phase(pipelinev1.PhaseFailed)
)

// DetailPhase is the phase of each of a Pipeline's children.
type DetailPhase struct {
	// PVPhase is the phase of the PersistentVolume.
	// +optional
	PVPhase corev1.PersistentVolumePhase `json:"pvPhase,omitempty"`

	// PVCPhase is the phase of the PersistentVolumeClaim.
	// +optional
	PVCPhase corev1.PersistentVolumeClaimPhase `json:"pvcPhase,omitempty"`

	// StepsPhase are the phases of the steps' Deployments, in step order.
	// +listType=atomic
	// +optional
	StepsPhase []StepPhase `json:"stepsPhase,omitempty"`
}

// StepPhase is the phase of one step's Deployment.
type StepPhase struct {
	// Model is the model of the step.
	// +optional
	Model string `json:"model,omitempty"`

	// DeploymentPhase is the phase of the step's Deployment.
	// +optional
	DeploymentPhase DeploymentPhase `json:"deploymentPhase,omitempty"`
}

// DeploymentPhase is the one-word state of a step's Deployment.
type DeploymentPhase string

// Phases of a step's Deployment: v1's, which the controller writes.
const (
	DeploymentPhaseMissing     = DeploymentPhase(pipelinev1.DeploymentPhaseMissing)
	DeploymentPhaseProgressing = DeploymentPhase(pipelinev1.DeploymentPhaseProgressing)
	DeploymentPhaseAvailable   = DeploymentPhase(pipelinev1.DeploymentPhaseAvailable)
	DeploymentPhaseTerminating = DeploymentPhase(pipelinev1.DeploymentPhaseTerminating)
)

// StepStatus is the observed state of one step.
type StepStatus struct {
	// Model is the model of the step this status is about.
	Model string `json:"model"`

	// DeploymentName is the name of the step's Deployment.
	// +optional
	DeploymentName string `json:"deploymentName,omitempty"`

	// ServiceName is the name of the step's Service.
	// +optional
	ServiceName string `json:"serviceName,omitempty"`

	// Replicas is the number of pods the step's Deployment asks for.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of those pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// StorageStatus is the observed state of the model volume and its claim.
type StorageStatus struct {
	// PVName is the name of the PersistentVolume.
	// +optional
	PVName string `json:"pvName,omitempty"`

	// PVPhase is the phase of the PersistentVolume.
	// +optional
	PVPhase corev1.PersistentVolumePhase `json:"pvPhase,omitempty"`

	// PVCName is the name of the PersistentVolumeClaim.
	// +optional
	PVCName string `json:"pvcName,omitempty"`

	// PVCPhase is the phase of the PersistentVolumeClaim.
	// +optional
	PVCPhase corev1.PersistentVolumeClaimPhase `json:"pvcPhase,omitempty"`
}

// Condition types and reasons of a Pipeline: v1's, which the controller writes.
const (
	ConditionReady            = pipelinev1.ConditionReady
	ConditionStorageReady     = pipelinev1.ConditionStorageReady
	ConditionStepsReady       = pipelinev1.ConditionStepsReady
	ConditionDegraded         = pipelinev1.ConditionDegraded
	ReasonReady               = pipelinev1.ReasonReady
	ReasonStorageNotReady     = pipelinev1.ReasonStorageNotReady
	ReasonStepsNotReady       = pipelinev1.ReasonStepsNotReady
	ReasonBound               = pipelinev1.ReasonBound
	ReasonPending             = pipelinev1.ReasonPending
	ReasonStepsAvailable      = pipelinev1.ReasonStepsAvailable
	ReasonAsExpected          = pipelinev1.ReasonAsExpected
	ReasonResourceExists      = pipelinev1.ReasonResourceExists
	ReasonNamespaceNotAllowed = pipelinev1.ReasonNamespaceNotAllowed
	ReasonStorageNotAllowed   = pipelinev1.ReasonStorageNotAllowed
	ReasonImageNotAllowed     = pipelinev1.ReasonImageNotAllowed
	ReasonTooManyReplicas     = pipelinev1.ReasonTooManyReplicas
	ReasonNamespaceNotFound   = pipelinev1.ReasonNamespaceNotFound
	ReasonStorageOverlap      = pipelinev1.ReasonStorageOverlap
	ReasonReconcileFailed     = pipelinev1.ReasonReconcileFailed
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// PipelineList is a list of Pipelines.
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Pipelines.
	Items []Pipeline `json:"items"`
}
