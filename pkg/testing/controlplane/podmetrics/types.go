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

package podmetrics

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The wire form of metrics.k8s.io/v1beta1, written out here so that the
// module does not depend on k8s.io/metrics for a test stand-in.

// Group and Version are the API the stand-in serves.
const (
	Group   = "metrics.k8s.io"
	Version = "v1beta1"
)

var groupVersion = Group + "/" + Version

// podMetrics is a metrics.k8s.io/v1beta1 PodMetrics.
type podMetrics struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Timestamp         metav1.Time        `json:"timestamp"`
	Window            metav1.Duration    `json:"window"`
	Containers        []containerMetrics `json:"containers"`
}

// containerMetrics is one container's usage in a PodMetrics.
type containerMetrics struct {
	Name  string              `json:"name"`
	Usage corev1.ResourceList `json:"usage"`
}

// podMetricsList is a metrics.k8s.io/v1beta1 PodMetricsList.
type podMetricsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []podMetrics `json:"items"`
}

// discovery documents of the group.
var (
	groupVersionForDiscovery = metav1.GroupVersionForDiscovery{GroupVersion: groupVersion, Version: Version}
	apiGroup                 = metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             Group,
		Versions:         []metav1.GroupVersionForDiscovery{groupVersionForDiscovery},
		PreferredVersion: groupVersionForDiscovery,
	}
	apiGroupList = metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{apiGroup},
	}
	apiResourceList = metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: groupVersion,
		APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: metav1.Verbs{"get", "list"}}},
	}
)
