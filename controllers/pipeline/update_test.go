package pipeline

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

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
	pod.SecurityContext = &corev1.PodSecurityContext{}
	live.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
	c := &pod.Containers[0]
	c.ImagePullPolicy = corev1.PullAlways
	c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	live.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1}
	return live
}

func TestDeploymentNeedsUpdate(t *testing.T) {
	p := samplePipeline()
	desired := desiredDeployment(p, "ns", 0)
	live := serverDefaultedDeployment(desired)
	if deploymentNeedsUpdate(desired, live) {
		t.Fatal("server defaults and others' labels and annotations counted as drift")
	}

	drifts := map[string]func(d *appsv1.Deployment){
		"image":    func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "other" },
		"replicas": func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) },
		"extra env (BEGIN)": func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "X", Value: "y"})
		},
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
			if !deploymentNeedsUpdate(desired, drifted) {
				t.Fatal("drift not detected")
			}
			merged := mergeDeployment(desired, drifted)
			if deploymentNeedsUpdate(desired, merged) {
				t.Fatal("merge did not repair the drift")
			}
			if merged.Labels["team"] != "added-by-someone" || merged.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != "now" {
				t.Error("merge dropped what others set")
			}
			if merged.Spec.Template.Spec.TerminationGracePeriodSeconds == nil {
				t.Error("merge dropped server defaults")
			}
		})
	}

	// The first step that stops being first loses BEGIN; a step that loses
	// its locations loses its affinity; a new image is pulled as the server decides.
	reordered := samplePipeline()
	reordered.Spec.Steps[0], reordered.Spec.Steps[1] = reordered.Spec.Steps[1], reordered.Spec.Steps[0]
	reordered.Spec.Steps[1].Location = ""
	reordered.Spec.Steps[1].Image = "nginx:1.27"
	want := desiredDeployment(reordered, "ns", 1)
	if want.Name != desired.Name {
		t.Fatalf("reordering renamed the step: %s -> %s", desired.Name, want.Name)
	}
	if !deploymentNeedsUpdate(want, live) {
		t.Fatal("reorder not detected")
	}
	merged := mergeDeployment(want, live)
	if _, ok := envMap(merged.Spec.Template.Spec.Containers[0].Env)[EnvBegin]; ok {
		t.Error("BEGIN kept on a step that is no longer first")
	}
	if merged.Spec.Template.Spec.Affinity != nil {
		t.Errorf("affinity kept: %+v", merged.Spec.Template.Spec.Affinity)
	}
	if merged.Spec.Template.Spec.Containers[0].ImagePullPolicy != "" {
		t.Error("the old image's pull policy was kept for the new image")
	}
	if merged.Labels[LabelStep] != "2" {
		t.Errorf("step label = %s, want 2", merged.Labels[LabelStep])
	}
}

func TestServiceNeedsUpdate(t *testing.T) {
	desired := desiredService(samplePipeline(), "ns", 0)
	live := desired.DeepCopy()
	live.Spec.ClusterIP, live.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
	live.Spec.Type = corev1.ServiceTypeClusterIP
	live.Spec.SessionAffinity = corev1.ServiceAffinityNone
	live.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	live.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	if serviceNeedsUpdate(desired, live) {
		t.Fatal("server defaults counted as drift")
	}
	drifted := live.DeepCopy()
	drifted.Spec.Ports[0].TargetPort = intstr.FromInt32(1)
	drifted.Spec.Selector = map[string]string{"app": "other"}
	if !serviceNeedsUpdate(desired, drifted) {
		t.Fatal("drift not detected")
	}
	merged := mergeService(desired, drifted)
	if serviceNeedsUpdate(desired, merged) || merged.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("merge: %+v", merged.Spec)
	}
	morePorts := live.DeepCopy()
	morePorts.Spec.Ports = append(morePorts.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 1})
	if !serviceNeedsUpdate(desired, morePorts) {
		t.Error("extra port not detected")
	}
}

func TestStorageNeedsUpdate(t *testing.T) {
	p := samplePipeline()
	pv := desiredPersistentVolume(p, "ns")
	live := pv.DeepCopy()
	// The binder completes the claim reference; the finalizer and phase are not ours.
	live.Spec.ClaimRef.UID, live.Spec.ClaimRef.Kind, live.Spec.ClaimRef.APIVersion = "claim-uid", "PersistentVolumeClaim", "v1"
	live.Finalizers = []string{"kubernetes.io/pv-protection"}
	live.Status.Phase = corev1.VolumeBound
	live.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("10240Mi") // same quantity, other spelling
	if volumeNeedsUpdate(pv, live) {
		t.Fatal("binder's additions counted as drift")
	}
	drifted := live.DeepCopy()
	drifted.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	if !volumeNeedsUpdate(pv, drifted) {
		t.Fatal("reclaim policy Delete not detected: the models would be at risk")
	}
	if merged := mergeVolume(pv, drifted); volumeNeedsUpdate(pv, merged) || merged.Spec.ClaimRef.UID != "claim-uid" {
		t.Errorf("merge: %+v", merged.Spec)
	}
	stolen := live.DeepCopy()
	stolen.Spec.ClaimRef.Name = "someone-elses-claim"
	merged := mergeVolume(pv, stolen)
	if volumeNeedsUpdate(pv, merged) || merged.Spec.ClaimRef.UID != "" {
		t.Errorf("a claim reference to another claim must be replaced whole: %+v", merged.Spec.ClaimRef)
	}

	pvc := desiredPersistentVolumeClaim(p, "ns")
	liveClaim := pvc.DeepCopy()
	liveClaim.Finalizers = []string{"kubernetes.io/pvc-protection"}
	liveClaim.Status.Phase = corev1.ClaimBound
	if claimNeedsUpdate(pvc, liveClaim) {
		t.Fatal("claim defaults counted as drift")
	}
	delete(liveClaim.Labels, LabelPipeline)
	if !claimNeedsUpdate(pvc, liveClaim) || claimNeedsUpdate(pvc, mergeClaim(pvc, liveClaim)) {
		t.Error("lost pipeline label not detected or not repaired")
	}
}
