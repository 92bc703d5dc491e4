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

package app

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// servedPod is an App's pod as the API server serves it once the kubelet
// has reported on it: the defaulted spec of a ReplicaSet's pod, the
// service account token volume, five conditions, and the managedFields of
// kube-controller-manager and the kubelet.
func servedPod() *corev1.Pod {
	p := appPod(0, crashLooping("OOMKilled", 3, false))
	p.GenerateName = p.Name[:len(p.Name)-1]
	p.CreationTimestamp = metav1.Now()
	p.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-23T20:00:00Z"}
	fields := func(n int) *metav1.FieldsV1 {
		return &metav1.FieldsV1{Raw: []byte(`{"f:status":{` + strings.Repeat(`"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:status":{}}},`, n) + `"f:phase":{}}}`)}
	}
	p.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1", FieldsV1: fields(12)},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1", FieldsV1: fields(14), Subresource: "status"},
	}
	p.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: ContainerName, Image: "registry.example.com/team/web:1.2.3",
			Ports:                    []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
			Resources:                corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		}},
		Volumes: []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](420),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			},
		}}}},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		DNSPolicy:                     corev1.DNSClusterFirst,
		ServiceAccountName:            "default",
		NodeName:                      "node-17.example.com",
		SecurityContext:               &corev1.PodSecurityContext{},
		SchedulerName:                 corev1.DefaultSchedulerName,
		Tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		},
		Priority:           ptr.To[int32](0),
		EnableServiceLinks: ptr.To(true),
		PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
	}
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		status := corev1.ConditionTrue
		if t == corev1.PodReady || t == corev1.ContainersReady {
			status = corev1.ConditionFalse
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.Now(),
			Reason: "ContainersNotReady", Message: "containers with unready status: [app]"})
	}
	p.Status.HostIP, p.Status.PodIP = "10.0.3.17", "10.244.17.23"
	p.Status.HostIPs, p.Status.PodIPs = []corev1.HostIP{{IP: "10.0.3.17"}}, []corev1.PodIP{{IP: "10.244.17.23"}}
	p.Status.StartTime = ptr.To(metav1.Now())
	p.Status.QOSClass = corev1.PodQOSBurstable
	s := &p.Status.ContainerStatuses[0]
	s.Image = "registry.example.com/team/web:1.2.3"
	s.ImageID = "registry.example.com/team/web@sha256:" + strings.Repeat("0123456789abcdef", 4)
	s.ContainerID = "containerd://" + strings.Repeat("fedcba9876543210", 4)
	s.Started = ptr.To(false)
	s.LastTerminationState.Terminated.ContainerID = s.ContainerID
	s.LastTerminationState.Terminated.StartedAt = metav1.Now()
	return p
}

// cachedHeap is the heap that n pods, decoded from the wire and passed
// through transform (nil: none) into an informer's store, keep alive, per pod.
func cachedHeap(t testing.TB, n int, transform cache.TransformFunc) float64 {
	wire, err := servedPod().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		var obj any
		pod := &corev1.Pod{}
		if err := pod.Unmarshal(wire); err != nil {
			t.Fatal(err)
		}
		pod.Name = fmt.Sprintf("web-%s-%05d", testHash, i)
		obj = pod
		if transform != nil {
			if obj, err = transform(obj); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// stripManagedFields is what the manager's shared factory does to every object.
func stripManagedFields(obj any) (any, error) {
	obj.(*corev1.Pod).ManagedFields = nil
	return obj, nil
}

// The transform keeps the problem of the pod, at a fraction of its cost in
// the cache. Run with -v to see the figures (docs/benchmarks.md quotes them).
func TestPodCacheHeap(t *testing.T) {
	const n = 2000
	wire, err := servedPod().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	full := cachedHeap(t, n, nil)
	noManagedFields := cachedHeap(t, n, stripManagedFields)
	transformed := cachedHeap(t, n, TransformPod)
	t.Logf("one pod: %d bytes protobuf; heap per cached pod: %.0f B whole, %.0f B without managedFields (the shared factory's transform), %.0f B with TransformPod (%.0f%% of whole)",
		len(wire), full, noManagedFields, transformed, 100*transformed/full)
	if transformed > full/3 {
		t.Errorf("a transformed pod costs %.0f B, more than a third of a whole one (%.0f B)", transformed, full)
	}
	obj, _ := TransformPod(servedPod())
	if got, want := problemOf(obj.(*corev1.Pod)), problemOf(servedPod()); got != want {
		t.Errorf("problem of the transformed pod = %v, want %v", got, want)
	}
}
