package pipeline

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// For every kind of child, needsUpdate reports whether the live object
// differs from the desired one in a field this controller sets, and merge
// returns a copy of live with those fields taken from desired and everything
// else (server defaults, other writers' labels, status) kept. Fields the API
// server defaults inside what we set (protocols, volume mode) are set by the
// builders explicitly, so that a defaulted object compares equal.

func volumeNeedsUpdate(desired, live *corev1.PersistentVolume) bool {
	return !hasLabels(live.ObjectMeta, desired.Labels) ||
		!quantityEqual(desired.Spec.Capacity, live.Spec.Capacity, corev1.ResourceStorage) ||
		!slices.Equal(desired.Spec.AccessModes, live.Spec.AccessModes) ||
		desired.Spec.PersistentVolumeReclaimPolicy != live.Spec.PersistentVolumeReclaimPolicy ||
		!claimRefMatches(desired.Spec.ClaimRef, live.Spec.ClaimRef)
	// The volume source and mode are immutable, and the volume's name
	// changes with them (storageName).
}

func mergeVolume(desired, live *corev1.PersistentVolume) *corev1.PersistentVolume {
	out := live.DeepCopy()
	mergeLabels(&out.ObjectMeta, desired.Labels)
	if out.Spec.Capacity == nil {
		out.Spec.Capacity = corev1.ResourceList{}
	}
	out.Spec.Capacity[corev1.ResourceStorage] = desired.Spec.Capacity[corev1.ResourceStorage]
	out.Spec.AccessModes = desired.Spec.AccessModes
	out.Spec.PersistentVolumeReclaimPolicy = desired.Spec.PersistentVolumeReclaimPolicy
	if !claimRefMatches(desired.Spec.ClaimRef, live.Spec.ClaimRef) {
		// A reference to another claim, UID included, is replaced whole.
		out.Spec.ClaimRef = desired.Spec.ClaimRef.DeepCopy()
	}
	return out
}

// claimRefMatches compares what the controller sets in a claimRef; the
// binder adds the claim's UID, kind and resourceVersion.
func claimRefMatches(desired, live *corev1.ObjectReference) bool {
	if desired == nil || live == nil {
		return desired == live
	}
	return desired.Namespace == live.Namespace && desired.Name == live.Name
}

func claimNeedsUpdate(desired, live *corev1.PersistentVolumeClaim) bool {
	// A bound claim's spec is immutable and the claim's name changes with
	// it (storageName): only the labels can drift.
	return !hasLabels(live.ObjectMeta, desired.Labels)
}

func mergeClaim(desired, live *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	out := live.DeepCopy()
	mergeLabels(&out.ObjectMeta, desired.Labels)
	return out
}

func deploymentNeedsUpdate(desired, live *appsv1.Deployment) bool {
	if !hasLabels(live.ObjectMeta, desired.Labels) ||
		!apiequality.Semantic.DeepEqual(desired.Spec.Replicas, live.Spec.Replicas) ||
		!hasLabels(live.Spec.Template.ObjectMeta, desired.Spec.Template.Labels) {
		return true
	}
	want, have := &desired.Spec.Template.Spec, &live.Spec.Template.Spec
	if !apiequality.Semantic.DeepEqual(nodeAffinityOf(want), nodeAffinityOf(have)) {
		return true
	}
	for _, v := range want.Volumes {
		i := slices.IndexFunc(have.Volumes, func(l corev1.Volume) bool { return l.Name == v.Name })
		if i < 0 || !apiequality.Semantic.DeepEqual(v.VolumeSource, have.Volumes[i].VolumeSource) {
			return true
		}
	}
	for _, c := range want.Containers {
		i := slices.IndexFunc(have.Containers, func(l corev1.Container) bool { return l.Name == c.Name })
		if i < 0 {
			return true
		}
		l := have.Containers[i]
		if c.Image != l.Image ||
			!apiequality.Semantic.DeepEqual(c.Args, l.Args) ||
			!apiequality.Semantic.DeepEqual(c.Env, l.Env) ||
			!apiequality.Semantic.DeepEqual(c.Ports, l.Ports) ||
			!apiequality.Semantic.DeepEqual(c.VolumeMounts, l.VolumeMounts) {
			return true
		}
	}
	return false
}

func mergeDeployment(desired, live *appsv1.Deployment) *appsv1.Deployment {
	out := live.DeepCopy()
	mergeLabels(&out.ObjectMeta, desired.Labels)
	out.Spec.Replicas = desired.Spec.Replicas
	mergeLabels(&out.Spec.Template.ObjectMeta, desired.Spec.Template.Labels)

	spec := &out.Spec.Template.Spec
	if na := nodeAffinityOf(&desired.Spec.Template.Spec); na != nil {
		if spec.Affinity == nil {
			spec.Affinity = &corev1.Affinity{}
		}
		spec.Affinity.NodeAffinity = na.DeepCopy()
	} else if spec.Affinity != nil {
		spec.Affinity.NodeAffinity = nil
		if apiequality.Semantic.DeepEqual(*spec.Affinity, corev1.Affinity{}) {
			spec.Affinity = nil
		}
	}
	for _, v := range desired.Spec.Template.Spec.Volumes {
		if i := slices.IndexFunc(spec.Volumes, func(l corev1.Volume) bool { return l.Name == v.Name }); i >= 0 {
			spec.Volumes[i] = *v.DeepCopy()
		} else {
			spec.Volumes = append(spec.Volumes, *v.DeepCopy())
		}
	}
	for _, c := range desired.Spec.Template.Spec.Containers {
		i := slices.IndexFunc(spec.Containers, func(l corev1.Container) bool { return l.Name == c.Name })
		if i < 0 {
			spec.Containers = append(spec.Containers, *c.DeepCopy())
			continue
		}
		l := &spec.Containers[i]
		if l.Image != c.Image {
			// Let the server default the pull policy for the new tag.
			l.ImagePullPolicy = ""
		}
		l.Image = c.Image
		l.Args = slices.Clone(c.Args)
		l.Env = slices.Clone(c.Env)
		l.Ports = slices.Clone(c.Ports)
		l.VolumeMounts = slices.Clone(c.VolumeMounts)
	}
	return out
}

func nodeAffinityOf(spec *corev1.PodSpec) *corev1.NodeAffinity {
	if spec.Affinity == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity
}

func serviceNeedsUpdate(desired, live *corev1.Service) bool {
	if !hasLabels(live.ObjectMeta, desired.Labels) ||
		!apiequality.Semantic.DeepEqual(desired.Spec.Selector, live.Spec.Selector) ||
		len(desired.Spec.Ports) != len(live.Spec.Ports) {
		return true
	}
	for i, p := range desired.Spec.Ports {
		l := live.Spec.Ports[i]
		if p.Name != l.Name || p.Port != l.Port || p.TargetPort != l.TargetPort || p.Protocol != l.Protocol {
			return true
		}
	}
	return false
}

func mergeService(desired, live *corev1.Service) *corev1.Service {
	out := live.DeepCopy()
	mergeLabels(&out.ObjectMeta, desired.Labels)
	out.Spec.Selector = desired.Spec.Selector
	ports := slices.Clone(desired.Spec.Ports)
	for i := range ports {
		// A node port someone allocated (type NodePort) is kept, not reallocated.
		if j := slices.IndexFunc(live.Spec.Ports, func(l corev1.ServicePort) bool { return l.Name == ports[i].Name }); j >= 0 {
			ports[i].NodePort = live.Spec.Ports[j].NodePort
		}
	}
	out.Spec.Ports = ports
	return out
}

// hasLabels reports whether meta carries every one of want.
func hasLabels(meta metav1.ObjectMeta, want map[string]string) bool {
	for k, v := range want {
		if have, ok := meta.Labels[k]; !ok || have != v {
			return false
		}
	}
	return true
}

// mergeLabels sets want on meta and keeps the other labels.
func mergeLabels(meta *metav1.ObjectMeta, want map[string]string) {
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	for k, v := range want {
		meta.Labels[k] = v
	}
}

func quantityEqual(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, okA := a[name]
	qb, okB := b[name]
	return okA == okB && qa.Cmp(qb) == 0
}
