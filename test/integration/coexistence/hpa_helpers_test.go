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
	"fmt"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// HPA settings: every pod uses ten times the target, so the HPA wants
// maxReplicas at once (within its scale-up policy of +4 pods per 15 s) and
// keeps wanting exactly that, whatever the count: any change after it is
// reached is somebody else's doing.
const (
	maxReplicas = 3
	hpaName     = "hpa"
)

var (
	podMemory    = resource.MustParse("1Gi")
	targetMemory = resource.MustParse("100Mi")
)

// loadPods makes the metrics stand-in report podMemory for every Running
// pod of ns, until the test ends.
func loadPods(t *testing.T, ns string) {
	metrics.SetUsage(ns, func(*corev1.Pod) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: podMemory, corev1.ResourceCPU: resource.MustParse("10m")}
	})
	t.Cleanup(func() { metrics.SetUsage(ns, nil) })
}

// createHPA creates an autoscaling/v2 HPA on target, from 1 to maxReplicas
// pods on an average memory target (memory, unlike CPU, has no readiness
// special cases).
func createHPA(t *testing.T, ns string, target autoscalingv2.CrossVersionObjectReference) {
	t.Helper()
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: hpaName},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: target,
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceMemory,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &targetMemory},
				},
			}},
		},
	}
	if _, err := cp.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(context.Background(), hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating HPA: %v", err)
	}
}

// hpaStatus describes the HPA's status for failure messages: why it does
// not scale is in its conditions.
func hpaStatus(ctx context.Context, ns string) string {
	hpa, err := cp.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpaName, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	parts := []string{fmt.Sprintf("current %d desired %d", hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas)}
	for _, c := range hpa.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// deploymentTarget is an HPA target reference to a Deployment.
func deploymentTarget(name string) autoscalingv2.CrossVersionObjectReference {
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}
