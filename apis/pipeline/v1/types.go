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

package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=dip,categories=ndsl
// +kubebuilder:printcolumn:name="Steps.model",type=string,JSONPath=`.status.models`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

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
	// step mounts its sub-directory named after the Pipeline at /data and
	// reads its model from /data/<model>.
	// +required
	ModelStorage ModelStorage `json:"modelStorage"`
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

	// NodeNames are the nodes the step may run on; empty lets the scheduler
	// choose. (v1beta1's location and locations, in one list.)
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	NodeNames []string `json:"nodeNames,omitempty"`

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

// ModelStorage describes the volume that holds the models: exactly one
// source (only nfs today) and its size.
type ModelStorage struct {
	// NFS is an NFS share mounted through the NFS CSI driver; the step pods
	// mount <path>/<pipeline name>, which must exist on the server.
	// +required
	NFS *NFSStorage `json:"nfs"`

	// Size is the capacity of the persistent volume and its claim.
	// +kubebuilder:default="10Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
}

// NFSStorage is an NFS export.
type NFSStorage struct {
	// Server is the NFS server's host name or IP address.
	// +kubebuilder:validation:MinLength=1
	// +required
	Server string `json:"server"`

	// Path is the exported path on the server (v1beta1's share).
	// +kubebuilder:validation:MinLength=1
	// +required
	Path string `json:"path"`
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

	// Phase sums the conditions up in one word: Running when Ready, Failed
	// when Degraded, Pending otherwise.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions are the latest observations of the Pipeline's state, one
	// per type: Ready, StorageReady, StepsReady, Degraded.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Steps are the observed states of the steps, in step order.
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

// Phases of a Pipeline.
const (
	// PhasePending: the storage or some step is not ready yet.
	PhasePending Phase = "Pending"
	// PhaseRunning: the storage is bound and every step has its replicas ready.
	PhaseRunning Phase = "Running"
	// PhaseFailed: the controller cannot bring the children to the desired state.
	PhaseFailed Phase = "Failed"
)

// StepStatus is the observed state of one step.
type StepStatus struct {
	// Model is the model of the step this status is about.
	Model string `json:"model"`

	// DeploymentName is the name of the step's Deployment.
	// +optional
	DeploymentName string `json:"deploymentName,omitempty"`

	// DeploymentPhase is the phase of the step's Deployment: Missing,
	// Progressing, Available or Terminating.
	// +optional
	DeploymentPhase string `json:"deploymentPhase,omitempty"`

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

// Phases of a step's Deployment, as StepStatus.DeploymentPhase says them.
const (
	// DeploymentPhaseMissing: the Deployment does not exist, or is not the
	// Pipeline's.
	DeploymentPhaseMissing = "Missing"
	// DeploymentPhaseProgressing: the Deployment exists and has not rolled
	// out all its replicas ready yet.
	DeploymentPhaseProgressing = "Progressing"
	// DeploymentPhaseAvailable: every replica is updated and ready.
	DeploymentPhaseAvailable = "Available"
	// DeploymentPhaseTerminating: the Deployment is being deleted.
	DeploymentPhaseTerminating = "Terminating"
)

// Condition types of a Pipeline.
const (
	// ConditionReady is True when the storage and every step are ready.
	ConditionReady = "Ready"
	// ConditionStorageReady is True when the volume claim is bound.
	ConditionStorageReady = "StorageReady"
	// ConditionStepsReady is True when every step has all its replicas ready.
	ConditionStepsReady = "StepsReady"
	// ConditionDegraded is True when the controller cannot bring the
	// children to the desired state.
	ConditionDegraded = "Degraded"
)

// Condition reasons of a Pipeline.
const (
	// ReasonReady explains Ready=True.
	ReasonReady = "Ready"
	// ReasonStorageNotReady explains Ready=False: the storage is not bound yet.
	ReasonStorageNotReady = "StorageNotReady"
	// ReasonStepsNotReady explains Ready=False and StepsReady=False: some
	// step has fewer ready replicas than desired.
	ReasonStepsNotReady = "StepsNotReady"
	// ReasonBound explains StorageReady=True: the claim is bound to the volume.
	ReasonBound = "Bound"
	// ReasonPending explains StorageReady=False: the volume or claim is not bound yet.
	ReasonPending = "Pending"
	// ReasonStepsAvailable explains StepsReady=True.
	ReasonStepsAvailable = "StepsAvailable"
	// ReasonAsExpected explains Degraded=False.
	ReasonAsExpected = "AsExpected"
	// ReasonResourceExists explains Degraded=True: a child with the desired
	// name exists and is not owned by this Pipeline.
	ReasonResourceExists = "ResourceExists"
	// ReasonNamespaceNotAllowed explains Degraded=True: spec.namespace is not
	// one the controller may write to (--pipeline-allowed-namespaces).
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonStorageNotAllowed explains Degraded=True: modelStorage names an
	// NFS export outside the manager's --pipeline-allowed-nfs.
	ReasonStorageNotAllowed = "StorageNotAllowed"
	// ReasonImageNotAllowed explains Degraded=True: a step's image is
	// outside the manager's --pipeline-allowed-images.
	ReasonImageNotAllowed = "ImageNotAllowed"
	// ReasonTooManyReplicas explains Degraded=True: a step asks for more
	// replicas than the manager's --pipeline-max-replicas.
	ReasonTooManyReplicas = "TooManyReplicas"
	// ReasonNamespaceNotFound explains Degraded=True: the target namespace
	// does not exist and the manager does not create namespaces
	// (--pipeline-create-namespaces).
	ReasonNamespaceNotFound = "NamespaceNotFound"
	// ReasonStorageOverlap explains Degraded=True: the Pipeline's directory
	// on the NFS export is, contains or lies inside an older Pipeline's.
	ReasonStorageOverlap = "StorageOverlap"
	// ReasonReconcileFailed explains Degraded=True: writing a child failed.
	ReasonReconcileFailed = "ReconcileFailed"
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
