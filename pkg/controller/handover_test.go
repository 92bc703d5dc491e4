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

package controller

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
)

// The replicas this manager applied and no longer wants are handed over,
// at their live value; replicas it still wants, never owned, or at the
// value the API server would give them anyway are not.
func TestHandOverPatch(t *testing.T) {
	withReplicas := appsv1ac.Deployment("web", "shop").WithSpec(appsv1ac.DeploymentSpec().WithReplicas(3))
	without := appsv1ac.Deployment("web", "shop").WithSpec(appsv1ac.DeploymentSpec().WithMinReadySeconds(5))
	live := func(applied *appsv1ac.DeploymentApplyConfiguration, replicas int32) *appsv1.Deployment {
		entry, err := AppliedEntry(applied)
		if err != nil {
			t.Fatal(err)
		}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid", ResourceVersion: "7",
				ManagedFields: []metav1.ManagedFieldsEntry{entry}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), MinReadySeconds: 5},
		}
	}
	handOver := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "uid", "resourceVersion": "7"},
		"spec":     map[string]any{"replicas": int64(3)},
	}
	for _, tc := range []struct {
		name     string
		resource string
		desired  *appsv1ac.DeploymentApplyConfiguration
		live     *appsv1.Deployment
		want     map[string]any
	}{
		{"applied, no longer wanted", "deployments", without, live(withReplicas, 3), handOver},
		{"still wanted", "deployments", withReplicas, live(withReplicas, 3), nil},
		{"never applied", "deployments", without, live(without, 3), nil},
		{"at the default", "deployments", without, live(withReplicas, 1), nil},
		{"another kind", "statefulsets", without, live(withReplicas, 3), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := fields(tc.desired)
			if err != nil {
				t.Fatal(err)
			}
			got, err := handOverPatch(appsv1.Resource(tc.resource), want, tc.live)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("handOverPatch = %v, want %v", got, tc.want)
			}
		})
	}
}
