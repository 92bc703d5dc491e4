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

package ingress

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTransformServiceKeepsWhatTheControllerReads(t *testing.T) {
	now := metav1.Now()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{AnnotationEnabled: "true", AnnotationHost: "h.example.com",
				"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.0.0.1",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	want, err := desiredIngress(svc, Options{DefaultDomain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := TransformService(svc)
	if err != nil {
		t.Fatal(err)
	}
	lean := obj.(*corev1.Service)
	got, err := desiredIngress(lean, Options{DefaultDomain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Rules[0].Host != *want.Spec.Rules[0].Host || got.OwnerReferences[0].UID == nil || *got.OwnerReferences[0].UID != "u" {
		t.Errorf("the Ingress of the lean Service differs: %+v, want %+v", got, want)
	}
	external := svc.DeepCopy()
	external.Spec.Type, external.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.other.svc.cluster.local"
	leanExternal, _ := TransformService(external)
	if _, err := desiredIngress(leanExternal.(*corev1.Service), Options{DefaultDomain: "example.com"}); err == nil {
		t.Error("the lean ExternalName Service is not refused: the transform dropped its type")
	}
	if lean.DeletionTimestamp == nil || lean.ResourceVersion != "7" || !wantsIngress(lean) {
		t.Errorf("lost what sync reads: %+v", lean.ObjectMeta)
	}
	if len(lean.Labels) != 0 || len(lean.ManagedFields) != 0 || len(lean.Annotations) != 2 || lean.Spec.Selector != nil || lean.Spec.ClusterIP != "" {
		t.Errorf("kept what no one reads: %+v %+v", lean.ObjectMeta, lean.Spec)
	}

	// A Service without ingress annotations keeps only its identity.
	plain, _ := TransformService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: map[string]string{"x": "y"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}})
	if p := plain.(*corev1.Service); p.Annotations != nil || p.Spec.Ports != nil {
		t.Errorf("unannotated Service kept %+v", p)
	}
	// Tombstones are cut down too.
	tomb, _ := TransformService(cache.DeletedFinalStateUnknown{Key: "shop/web", Obj: svc})
	if s := tomb.(cache.DeletedFinalStateUnknown).Obj.(*corev1.Service); s.Labels != nil {
		t.Errorf("tombstone kept labels %v", s.Labels)
	}
}
