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
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestStepPodSecurityPerLevel(t *testing.T) {
	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	for _, tc := range []struct {
		level     PodSecurityLevel
		pod       *corev1.PodSecurityContext
		container *corev1.SecurityContext
	}{{
		level:     PodSecurityBaseline,
		pod:       &corev1.PodSecurityContext{SeccompProfile: runtimeDefault},
		container: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)},
	}, {
		level: PodSecurityRestricted,
		pod:   &corev1.PodSecurityContext{SeccompProfile: runtimeDefault, RunAsNonRoot: ptr.To(true)},
		container: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}} {
		t.Run(string(tc.level), func(t *testing.T) {
			d := mustTyped[appsv1.Deployment](desiredDeployment(stored(samplePipeline()), "ns", 0, tc.level))
			spec := d.Spec.Template.Spec
			if !ptr.Equal(spec.AutomountServiceAccountToken, ptr.To(false)) {
				t.Errorf("automountServiceAccountToken = %v, want false", spec.AutomountServiceAccountToken)
			}
			if !reflect.DeepEqual(spec.SecurityContext, tc.pod) {
				t.Errorf("pod securityContext = %+v, want %+v", spec.SecurityContext, tc.pod)
			}
			if got := spec.Containers[0].SecurityContext; !reflect.DeepEqual(got, tc.container) {
				t.Errorf("container securityContext = %+v, want %+v", got, tc.container)
			}
		})
	}
}

func TestValidatePodSecurity(t *testing.T) {
	for _, l := range []PodSecurityLevel{"", PodSecurityBaseline, PodSecurityRestricted} {
		if err := validatePodSecurity(l); err != nil {
			t.Errorf("%q: %v", l, err)
		}
	}
	if err := validatePodSecurity("privileged"); err == nil {
		t.Error("privileged accepted")
	}
}
