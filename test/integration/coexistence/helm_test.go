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

package coexistence

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// helmRelease is what `helm install web ./nginx` leaves in ns: a Deployment
// web-nginx whose pods carry the labels Helm charts put on everything,
// naming the release like the App.
func helmRelease(release string) *appsv1.Deployment {
	selector := map[string]string{
		"app.kubernetes.io/name":     release,
		"app.kubernetes.io/instance": release,
	}
	labels := map[string]string{
		"app.kubernetes.io/name":       release,
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                "nginx-1.0.0",
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:        release + "-nginx",
			Labels:      labels,
			Annotations: map[string]string{"meta.helm.sh/release-name": release},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "nginx", Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				}}},
			},
		},
	}
}

// TestHelmReleaseOfTheSameName runs an App and a Helm release of the same
// name side by side: the App's Service routes only to the App's pods, and
// neither Deployment touches the other's ReplicaSets or pods.
func TestHelmReleaseOfTheSameName(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	ctx := context.Background()

	helm, err := cp.Client.AppsV1().Deployments(ns).Create(ctx, helmRelease("web"), metav1.CreateOptions{FieldManager: "helm"})
	if err != nil {
		t.Fatal(err)
	}
	app := createApp(t, ns, newApp("web", ptr.To[int32](2), true))
	appDeployment := deploymentOf(t, ns, app.UID)
	svc := serviceOf(t, ns, app.UID)
	available(t, ns, helm.Name, 2)
	available(t, ns, appDeployment.Name, 2)

	// Once both sets of pods run, the Service's endpoints are exactly the
	// App's pods, and stay so.
	routing := func(ctx context.Context) error {
		return routesOnlyTo(ctx, ns, svc.Name, appDeployment.UID, helm.UID)
	}
	eventually(t, "the App's Service to route to the App's pods", func(ctx context.Context) (bool, error) {
		err := routing(ctx)
		if errors.As(err, new(misrouted)) {
			t.Fatal(err) // final: no need to wait for the deadline
		}
		return err == nil, err
	})
	holds(t, "routing to the App's pods only", routing)

	// Each Deployment controls its own ReplicaSets, each ReplicaSet its own
	// pods, and the counts are what each owner asked for.
	for _, owner := range []*appsv1.Deployment{helm, appDeployment} {
		d, err := getDeployment(ctx, ns, owner.Name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status.Replicas != 2 {
			t.Errorf("Deployment %s counts %d pods, want its own 2", d.Name, d.Status.Replicas)
		}
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		rs := metav1.GetControllerOf(pod)
		if rs == nil {
			t.Errorf("pod %s has no controller", pod.Name)
			continue
		}
		owner, err := cp.Client.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		helmPod := pod.Labels["app.kubernetes.io/managed-by"] == "Helm"
		if helmPod != controlledBy(owner, helm.UID) {
			t.Errorf("pod %s (Helm's: %t) belongs to ReplicaSet %s controlled by %v", pod.Name, helmPod, owner.Name, metav1.GetControllerOf(owner))
		}
	}
	// The manager never wrote to the Helm release.
	if n := managerWrites(deploymentsPath(ns), helm.Name); n != 0 {
		t.Errorf("the manager wrote %d times to the Helm release's Deployment", n)
	}
}
