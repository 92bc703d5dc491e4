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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// The controller applies a child when the cached object lacks a field the
// desired one sets, or holds one this manager applied and no longer sets:
// the API server's apply then merges, keeping server defaults and what
// others set, and drops what the controller no longer sets.

// serverDefaulted adds what the API server and other controllers add to a
// Deployment the controller created: none of it is drift.
func serverDefaultedDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	live := d.DeepCopy()
	live.ResourceVersion, live.Generation = "42", 1
	live.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	live.Labels["team"] = "added-by-someone"
	live.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	live.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	live.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	pod := &live.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyAlways
	pod.DNSPolicy = corev1.DNSClusterFirst
	pod.SchedulerName = corev1.DefaultSchedulerName
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{}
	}
	live.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "now"
	c := &pod.Containers[0]
	c.ImagePullPolicy = corev1.PullAlways
	c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	live.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1}
	return live
}

func upToDate(t *testing.T, desired any, live runtime.Object) bool {
	t.Helper()
	ok, err := controller.UpToDate(desired, live)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// applied gives live the managedFields entry an apply of desired leaves.
func applied(t *testing.T, desired any, live *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	entry, err := controller.AppliedEntry(desired)
	if err != nil {
		t.Fatal(err)
	}
	live.ManagedFields = []metav1.ManagedFieldsEntry{entry}
	return live
}

func TestDeploymentDrift(t *testing.T) {
	p := stored(samplePipeline())
	desired := desiredDeployment(p, "ns", 0, PodSecurityBaseline)
	live := applied(t, desired, serverDefaultedDeployment(mustTyped[appsv1.Deployment](desired)))
	if !upToDate(t, desired, live) {
		t.Fatal("server defaults and others' labels and annotations counted as drift")
	}

	drifts := map[string]func(d *appsv1.Deployment){
		"image":           func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "other" },
		"replicas":        func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) },
		"args removed":    func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Args = nil },
		"affinity gone":   func(d *appsv1.Deployment) { d.Spec.Template.Spec.Affinity = nil },
		"mount moved":     func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath = "/x" },
		"claim changed":   func(d *appsv1.Deployment) { d.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "x" },
		"label changed":   func(d *appsv1.Deployment) { d.Labels[LabelStep] = "9" },
		"pod label gone":  func(d *appsv1.Deployment) { delete(d.Spec.Template.Labels, LabelStep) },
		"container gone":  func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "renamed" },
		"port changed":    func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 1 },
		"volume replaced": func(d *appsv1.Deployment) { d.Spec.Template.Spec.Volumes[0].Name = "other" },
	}
	for name, drift := range drifts {
		t.Run(name, func(t *testing.T) {
			drifted := live.DeepCopy()
			drift(drifted)
			if upToDate(t, desired, drifted) {
				t.Fatal("drift not detected")
			}
		})
	}

	// The first step that stops being first loses BEGIN; a step that loses
	// its locations loses its affinity: the desired fields change, so the
	// controller applies, and the apply drops what it no longer sets.
	reordered := stored(samplePipeline())
	reordered.Spec.Steps[0], reordered.Spec.Steps[1] = reordered.Spec.Steps[1], reordered.Spec.Steps[0]
	reordered.Spec.Steps[1].NodeNames = nil
	reordered.Spec.Steps[1].Image = "nginx:1.27"
	want := desiredDeployment(reordered, "ns", 1, PodSecurityBaseline)
	if *want.GetName() != *desired.GetName() {
		t.Fatalf("reordering renamed the step: %s -> %s", *desired.GetName(), *want.GetName())
	}
	if upToDate(t, want, live) {
		t.Fatal("reorder not detected")
	}
	if _, ok := envMap(mustTyped[appsv1.Deployment](want).Spec.Template.Spec.Containers[0].Env)[EnvBegin]; ok {
		t.Error("BEGIN kept on a step that is no longer first")
	}
	if mustTyped[appsv1.Deployment](want).Spec.Template.Spec.Affinity != nil {
		t.Error("affinity kept on a step without locations")
	}
	if got := mustTyped[appsv1.Deployment](want).Labels[LabelStep]; got != "2" {
		t.Errorf("step label = %s, want 2", got)
	}
	unpinned := stored(samplePipeline())
	unpinned.Spec.Steps[0].NodeNames = nil
	if upToDate(t, desiredDeployment(unpinned, "ns", 0, PodSecurityBaseline), live) {
		t.Error("losing its locations is not drift: the affinity this manager applied would stay")
	}

	// An env entry another manager adds is its own: kept, no write.
	theirs := live.DeepCopy()
	c := &theirs.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "X", Value: "y"})
	if !upToDate(t, desired, theirs) {
		t.Error("another manager's env entry counted as drift")
	}
}

func TestServiceDrift(t *testing.T) {
	desired := desiredService(stored(samplePipeline()), "ns", 0)
	live := mustTyped[corev1.Service](desired)
	live.Spec.ClusterIP, live.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
	live.Spec.Type = corev1.ServiceTypeClusterIP
	live.Spec.SessionAffinity = corev1.ServiceAffinityNone
	live.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	live.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	if !upToDate(t, desired, live) {
		t.Fatal("server defaults counted as drift")
	}
	drifted := live.DeepCopy()
	drifted.Spec.Ports[0].TargetPort = intstr.FromInt32(1)
	drifted.Spec.Selector = map[string]string{"app": "other"}
	if upToDate(t, desired, drifted) {
		t.Fatal("drift not detected")
	}
	morePorts := live.DeepCopy()
	morePorts.Spec.Ports = append(morePorts.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 1})
	if !upToDate(t, desired, morePorts) {
		t.Error("another manager's port entry counted as drift: it is its own, kept")
	}
}

func TestStorageDrift(t *testing.T) {
	p := stored(samplePipeline())
	pv := desiredPersistentVolume(p, "ns", "claim-uid")
	live := mustTyped[corev1.PersistentVolume](pv)
	// The binder completes the claim reference; the finalizer and phase are not ours.
	live.Spec.ClaimRef.Kind, live.Spec.ClaimRef.APIVersion, live.Spec.ClaimRef.ResourceVersion = "PersistentVolumeClaim", "v1", "7"
	live.Finalizers = []string{"kubernetes.io/pv-protection"}
	live.Status.Phase = corev1.VolumeBound
	live.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("10240Mi") // same quantity, other spelling
	if !upToDate(t, pv, live) {
		t.Fatal("binder's additions counted as drift")
	}
	drifted := live.DeepCopy()
	drifted.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	if upToDate(t, pv, drifted) {
		t.Fatal("reclaim policy Delete not detected: the models would be at risk")
	}
	stolen := live.DeepCopy()
	stolen.Spec.ClaimRef.Name = "someone-elses-claim"
	if upToDate(t, pv, stolen) {
		t.Error("a claim reference to another claim not detected")
	}
	stale := live.DeepCopy()
	stale.Spec.ClaimRef.UID = "deleted-claim-uid"
	if upToDate(t, pv, stale) {
		t.Error("a claim reference to an earlier claim of the name not detected: the claim made again would never bind")
	}
	// A volume written before the UID was desired, which the binder bound
	// to the claim since, is as desired: no write, no rebind.
	older := live.DeepCopy()
	entry, err := controller.AppliedEntry(desiredPersistentVolume(p, "ns", ""))
	if err != nil {
		t.Fatal(err)
	}
	older.ManagedFields = []metav1.ManagedFieldsEntry{entry}
	if !upToDate(t, pv, older) {
		t.Error("a volume bound by the binder before the UID was desired counted as drift")
	}

	pvc := desiredPersistentVolumeClaim(p, "ns")
	liveClaim := mustTyped[corev1.PersistentVolumeClaim](pvc)
	liveClaim.Finalizers = []string{"kubernetes.io/pvc-protection"}
	liveClaim.Status.Phase = corev1.ClaimBound
	if !upToDate(t, pvc, liveClaim) {
		t.Fatal("claim defaults counted as drift")
	}
	delete(liveClaim.Labels, LabelPipeline)
	if upToDate(t, pvc, liveClaim) {
		t.Error("lost pipeline label not detected")
	}
}
