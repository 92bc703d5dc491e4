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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestStaleClaimRef(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "models", UID: "new"}}
	ref := func(namespace, name string, uid types.UID) *corev1.ObjectReference {
		return &corev1.ObjectReference{Namespace: namespace, Name: name, UID: uid}
	}
	for _, tc := range []struct {
		name     string
		claimRef *corev1.ObjectReference
		want     bool
	}{
		{"no claimRef", nil, false},
		{"pre-bound, not yet bound", ref("ns", "models", ""), false},
		{"bound to the claim", ref("ns", "models", "new"), false},
		{"reserved for a deleted claim of that name", ref("ns", "models", "old"), true},
		{"another claim's name: the apply moves it", ref("other", "models", "old"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{ClaimRef: tc.claimRef}}
			if got := staleClaimRef(pv, claim); got != tc.want {
				t.Errorf("staleClaimRef = %v, want %v", got, tc.want)
			}
		})
	}
}
