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

package conversion

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
)

// BenchmarkConvertToV1 is the webhook's share of listing Apps through v1:
// one unstructured v1beta1 App, as a ConversionReview carries it, to v1.
// make bench measures the whole list through the API server.
func BenchmarkConvertToV1(b *testing.B) {
	app := &appv1beta1.App{
		TypeMeta: metav1.TypeMeta{APIVersion: "ingress.example.com/v1beta1", Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: "app-00001", Namespace: "bench", UID: "0d6e2a44-7a51-4f67-9d0c-3b8e0c1f6a11",
			Labels:      map[string]string{"app.kubernetes.io/name": "app"},
			Annotations: map[string]string{appv1beta1.EnableIngressRequestedAnnotation: "false"}},
		Spec: appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](3), EnableService: true, EnableIngress: true, Port: 80},
		Status: appv1beta1.AppStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Available", Message: "3/3", LastTransitionTime: metav1.Now()}}},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(app)
	if err != nil {
		b.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: m}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Converter{}).Convert(ctx, obj, "ingress.example.com/v1"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
}
