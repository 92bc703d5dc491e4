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
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestMetricsStandInScalesDeployment proves the suite's HPA machinery on a
// plain Deployment, without the manager: the aggregator reaches the
// metrics stand-in and kube-controller-manager's HPA controller scales on
// what it reports. The App and Pipeline cases depend on it.
func TestMetricsStandInScalesDeployment(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	labels := map[string]string{"app": "plain"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
			},
		},
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	available(t, ns, "plain", 1)
	loadPods(t, ns)
	createHPA(t, ns, deploymentTarget("plain"))
	scaledBy(t, ns, "plain")
}

// scaledBy waits until the HPA has scaled the Deployment to maxReplicas.
func scaledBy(t *testing.T, ns, deployment string) {
	t.Helper()
	eventually(t, "the HPA to scale Deployment "+deployment+" to 3", func(ctx context.Context) (bool, error) {
		d, err := getDeployment(ctx, ns, deployment)
		if err != nil {
			return false, err
		}
		if got := ptr.Deref(d.Spec.Replicas, 1); got != maxReplicas {
			return false, errorf("spec.replicas %d; HPA: %s", got, hpaStatus(ctx, ns))
		}
		return true, nil
	})
}
