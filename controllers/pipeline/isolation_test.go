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
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Issue 35: what one team's Pipeline makes the manager write grants nothing
// across teams.

// The storage name ends in 64 bits of hash (16 hex digits), so nobody can
// search for another Pipeline's name offline.
func TestStorageNameHashHas64Bits(t *testing.T) {
	name := storageName(stored(samplePipeline()), "ns")
	if !regexp.MustCompile(`-[0-9a-f]{16}$`).MatchString(name) {
		t.Errorf("storageName = %q, want it to end in 16 hex digits", name)
	}
}

// Two PVs of one Pipeline (the old and the new during a storage change) get
// different CSI volume handles.
func TestVolumeHandleIsUniquePerVolume(t *testing.T) {
	p := stored(samplePipeline())
	old := mustTyped[corev1.PersistentVolume](desiredPersistentVolume(p, "ns", "claim-uid"))
	moved := mustTyped[corev1.PersistentVolume](desiredPersistentVolume(p, "other", "claim-uid"))
	if old.Spec.CSI.VolumeHandle == moved.Spec.CSI.VolumeHandle {
		t.Errorf("PVs %s and %s share the volume handle %q", old.Name, moved.Name, old.Spec.CSI.VolumeHandle)
	}
	if want := "192.168.20.235#/home/aiedge/csiTest#facedetection-pipeline#" + old.Name; old.Spec.CSI.VolumeHandle != want {
		t.Errorf("volume handle = %q, want %q", old.Spec.CSI.VolumeHandle, want)
	}
}

// Step pods carry no label whose value the Pipeline's author chose: other
// teams' Services and NetworkPolicies select pods by label. The author's
// strings are annotations.
func TestStepPodLabelsCarryNoAuthorStrings(t *testing.T) {
	p := stored(samplePipeline())
	p.Name = "frontend"
	p.Spec.Steps[0].Model = "payments"
	d := mustTyped[appsv1.Deployment](desiredDeployment(p, "ns", 0, PodSecurityBaseline))
	for k, v := range d.Spec.Template.Labels {
		if v == "frontend" || v == "payments" {
			t.Errorf("pod label %s=%s is the author's string", k, v)
		}
	}
	for _, l := range []map[string]string{d.Labels, d.Spec.Template.Labels} {
		if _, ok := l["app.kubernetes.io/name"]; ok {
			t.Errorf("labels %v carry app.kubernetes.io/name", l)
		}
	}
	a := d.Spec.Template.Annotations
	if a["distri-infer.ndsl.cn/pipeline"] != "frontend" || a["distri-infer.ndsl.cn/model"] != "payments" {
		t.Errorf("pod annotations = %v, want the pipeline and the model", a)
	}
}

// What the allowlist checked is what the Deployment runs: the normalised
// reference.
func TestDeploymentRunsTheNormalisedImage(t *testing.T) {
	p := stored(samplePipeline())
	p.Spec.Steps[0].Image = "nginx:1.27"
	p.Spec.Steps[1].Image = "registry.example.com/team/model@sha256:" + strings.Repeat("a", 64)
	for i, want := range []string{"docker.io/library/nginx:1.27", p.Spec.Steps[1].Image} {
		d := mustTyped[appsv1.Deployment](desiredDeployment(p, "ns", i, PodSecurityBaseline))
		if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
			t.Errorf("step %d image = %q, want %q", i, got, want)
		}
	}
}

// An image ID or a bare digest names no repository: containerd runs
// whatever the node has cached under it, whatever the allowlist says.
func TestImageWithoutRepositoryIsRefused(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, allowed := range [][]string{{"docker.io/"}, nil} {
		for _, image := range []string{"sha256:" + id, id} {
			err := imageRefusal(allowed, image)
			if err == nil || !strings.Contains(err.Error(), "names no repository") {
				t.Errorf("%q with allowlist %q: %v, want a refusal naming the missing repository", image, allowed, err)
			}
		}
	}
}

// A step mounts the claim only when the claim and its volume are both the
// Pipeline's and name each other.
func TestMountBlocker(t *testing.T) {
	p := stored(samplePipeline())
	name := storageName(p, "ns")
	ours := func() observed {
		pv := mustTyped[corev1.PersistentVolume](desiredPersistentVolume(p, "ns", "claim-uid"))
		pvc := mustTyped[corev1.PersistentVolumeClaim](desiredPersistentVolumeClaim(p, "ns"))
		pvc.UID = "claim-uid"
		return observed{namespace: "ns", volume: pv, claim: pvc}
	}
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	for _, tc := range []struct {
		name   string
		mutate func(o *observed)
		want   string
	}{
		{"ours", func(*observed) {}, ""},
		{"the volume is reserved by name only", func(o *observed) { o.volume.Spec.ClaimRef.UID = "" }, "is not reserved for"},
		{"another's claim on the name", func(o *observed) {
			o.claim, o.claimErr = nil, controller.NewNotOwnedError("PersistentVolumeClaim", foreign)
		}, "PersistentVolumeClaim ns/" + name + " exists and is not ours"},
		{"another's volume on the name", func(o *observed) {
			o.volume, o.claim, o.volumeErr = nil, nil, controller.NewNotOwnedError("PersistentVolume", &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}, "PersistentVolume " + name + " exists and is not ours"},
		{"no volume yet", func(o *observed) { o.volume, o.claim = nil, nil }, "PersistentVolume " + name + " does not exist"},
		{"no claim yet", func(o *observed) { o.claim = nil }, "PersistentVolumeClaim ns/" + name + " does not exist"},
		{"a claim not controlled by the Pipeline", func(o *observed) { o.claim.OwnerReferences = nil }, "is not controlled by this Pipeline"},
		{"a volume not controlled by the Pipeline", func(o *observed) { o.volume.OwnerReferences = nil }, "is not controlled by this Pipeline"},
		{"the claim names another volume", func(o *observed) { o.claim.Spec.VolumeName = "elsewhere" }, `names PersistentVolume "elsewhere"`},
		{"the volume is bound to another claim", func(o *observed) { o.volume.Spec.ClaimRef.UID = "other-uid" }, "is not reserved for"},
		{"the volume is reserved for another name", func(o *observed) { o.volume.Spec.ClaimRef.Name = "other" }, "is not reserved for"},
		{"the volume is reserved for nobody", func(o *observed) { o.volume.Spec.ClaimRef = nil }, "is not reserved for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := ours()
			tc.mutate(&obs)
			got := mountBlocker(p, "ns", name, obs)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("mountBlocker = %q, want %q", got, tc.want)
			}
		})
	}
}
