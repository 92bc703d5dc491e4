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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:unservedversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=exapp,categories=ndsl
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:deprecatedversion:warning="ingress.example.com/v1beta1 App is deprecated; use ingress.example.com/v1, the stored version; v1beta1 needs the manager's conversion webhook"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (at most 63 lower-case letters, digits or '-', starting with a letter and ending with a letter or digit), since it names the App's Service"

// App runs a container image as a Deployment and, when asked, exposes it
// through a Service and an Ingress.
type App struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the App.
	Spec AppSpec `json:"spec"`

	// Status is the state of the App as last observed by the controller.
	// +optional
	Status AppStatus `json:"status,omitempty"`
}

// has() keeps the rule from failing with "no such key" should a default ever be dropped.
// +kubebuilder:validation:XValidation:rule="!(has(self.enable_ingress) && self.enable_ingress) || (has(self.enable_service) && self.enable_service)",message="enable_ingress requires enable_service to be true: the Ingress routes to the App's Service"

// AppSpec is the desired state of an App.
type AppSpec struct {
	// Image is the container image to run.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// Replicas is the number of pods to run. Unset leaves the Deployment's
	// replicas to others (an HPA on the Deployment); the Deployment then
	// starts with 1.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"` // a pointer, so that an explicit 0 is not taken for unset

	// EnableService asks for a Service in front of the pods.
	// +kubebuilder:default=false
	// +optional
	EnableService bool `json:"enable_service,omitempty"`

	// EnableIngress asks for an Ingress routing to the Service; it requires
	// EnableService.
	// +kubebuilder:default=false
	// +optional
	EnableIngress bool `json:"enable_ingress,omitempty"`

	// Port is the container port, and the port the Service exposes.
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// ImagePullPolicy is the pull policy of the App's container: Always,
	// IfNotPresent or Never. Unset leaves it to Kubernetes, which defaults
	// it to Always for the tag latest (or no tag) and IfNotPresent
	// otherwise; IfNotPresent or Never runs an image loaded into the nodes
	// (kind load docker-image) under :latest.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
}

// AppStatus is the observed state of an App.
type AppStatus struct {
	// ObservedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods of the App's Deployment.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of those pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AvailableReplicas is the number of those pods that have been ready for
	// at least the Deployment's minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// Selector is the label selector of the App's pods, in string form:
	// the scale subresource's selector, which an HPA reads metrics by.
	// +optional
	Selector string `json:"selector,omitempty"`

	// URL is where the App can be reached; empty while it cannot be.
	// +optional
	URL string `json:"url,omitempty"`

	// Conditions are the latest observations of the App's state, one per type.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Condition types and reasons of an App: v1's, which the controller writes.
const (
	ConditionReady                 = appv1.ConditionReady
	ConditionProgressing           = appv1.ConditionProgressing
	ConditionDegraded              = appv1.ConditionDegraded
	ReasonAvailable                = appv1.ReasonAvailable
	ReasonReplicasUnavailable      = appv1.ReasonReplicasUnavailable
	ReasonRollingOut               = appv1.ReasonRollingOut
	ReasonRolloutComplete          = appv1.ReasonRolloutComplete
	ReasonAsExpected               = appv1.ReasonAsExpected
	ReasonResourceExists           = appv1.ReasonResourceExists
	ReasonReconcileFailed          = appv1.ReasonReconcileFailed
	ReasonResourceMissing          = appv1.ReasonResourceMissing
	ReasonProgressDeadlineExceeded = appv1.ReasonProgressDeadlineExceeded
	ReasonIngressHostRequired      = appv1.ReasonIngressHostRequired
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// AppList is a list of Apps.
type AppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Apps.
	Items []App `json:"items"`
}
