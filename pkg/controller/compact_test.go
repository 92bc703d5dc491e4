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

package controller

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// fresh returns a copy of s with its own memory, as a decoder gives it.
func fresh(s string) string { return strings.Clone(s) }

func servedDeployment(name string) *appsv1.Deployment {
	labels := func() map[string]string {
		return map[string]string{fresh(ManagedByLabel): fresh(ManagedByValue), fresh("app.kubernetes.io/name"): fresh(name)}
	}
	surge := intstr.FromString(fresh("25%"))
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: fresh("ns"), UID: "uid-" + "x", ResourceVersion: "7",
			Labels:      labels(),
			Annotations: map[string]string{fresh("deployment.kubernetes.io/revision"): fresh("1")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("ingress.example.com/v1beta1"), Kind: fresh("App"),
				Name: fresh(name), UID: "owner", Controller: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: fresh(FieldManager), Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: fresh("apps/v1"),
					FieldsType: fresh("FieldsV1"), FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}},
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
			},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{fresh("app.kubernetes.io/name"): fresh(name)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: fresh("app"), Image: fresh("nginx:1.27"),
						Ports:                  []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.Protocol(fresh("TCP"))}},
						TerminationMessagePath: fresh("/dev/termination-log")}},
					DNSPolicy: corev1.DNSPolicy(fresh("ClusterFirst")),
				},
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.DeploymentStrategyType(fresh("RollingUpdate")),
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &surge}},
		},
		Status: appsv1.DeploymentStatus{Replicas: 1, Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentConditionType(fresh("Available")), Status: corev1.ConditionStatus(fresh("True")),
			Reason: fresh("MinimumReplicasAvailable"), Message: fresh("Deployment has minimum availability.")}}},
	}
}

func sameMemory(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestCompactKeepsEveryValue: Compact changes no value a controller reads,
// only where it is stored; what it drops is what TrimManagedFields drops.
func TestCompactKeepsEveryValue(t *testing.T) {
	for _, obj := range []any{
		servedDeployment("app-1"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: map[string]string{"a": "b"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"a": "b"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "nginx"}}}},
		&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}}},
	} {
		want, _ := TrimManagedFields(deepCopy(t, obj))
		got, err := Compact(deepCopy(t, obj))
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("Compact(%T) changed a value:\n got %+v\nwant %+v", obj, got, want)
		}
	}
}

func deepCopy(t *testing.T, obj any) any {
	t.Helper()
	return reflect.ValueOf(obj).MethodByName("DeepCopy").Call(nil)[0].Interface()
}

// TestCompactShares: equal strings of two cached objects share one copy,
// and a Deployment's template labels equal to its labels share its map;
// different template labels keep their own.
func TestCompactShares(t *testing.T) {
	a, _ := Compact(servedDeployment("app-1"))
	b, _ := Compact(cache.DeletedFinalStateUnknown{Key: "ns/app-2", Obj: servedDeployment("app-2")})
	da, db := a.(*appsv1.Deployment), b.(cache.DeletedFinalStateUnknown).Obj.(*appsv1.Deployment)
	if len(db.ManagedFields) != 1 || db.ManagedFields[0].FieldsV1 != nil {
		t.Errorf("a tombstone's managedFields were not trimmed: %+v", db.ManagedFields)
	}
	for _, pair := range [][2]string{
		{da.Namespace, db.Namespace},
		{da.Labels[ManagedByLabel], db.Labels[ManagedByLabel]},
		{da.OwnerReferences[0].Kind, db.OwnerReferences[0].Kind},
		{da.ManagedFields[0].Manager, db.ManagedFields[0].Manager},
		{da.Spec.Template.Spec.Containers[0].Image, db.Spec.Template.Spec.Containers[0].Image},
		{string(da.Spec.Template.Spec.DNSPolicy), string(db.Spec.Template.Spec.DNSPolicy)},
		{da.Spec.Strategy.RollingUpdate.MaxSurge.StrVal, db.Spec.Strategy.RollingUpdate.MaxSurge.StrVal},
		{da.Status.Conditions[0].Message, db.Status.Conditions[0].Message},
	} {
		if !sameMemory(pair[0], pair[1]) {
			t.Errorf("%q is held twice", pair[0])
		}
	}
	if reflect.ValueOf(da.Spec.Template.Labels).UnsafePointer() != reflect.ValueOf(da.Labels).UnsafePointer() {
		t.Error("equal template labels do not share the Deployment's labels")
	}

	c := servedDeployment("app-3")
	c.Spec.Template.Labels["extra"] = "x"
	cc, _ := Compact(c)
	dc := cc.(*appsv1.Deployment)
	if reflect.ValueOf(dc.Spec.Template.Labels).UnsafePointer() == reflect.ValueOf(dc.Labels).UnsafePointer() || dc.Spec.Template.Labels["extra"] != "x" {
		t.Errorf("different template labels were replaced: %v", dc.Spec.Template.Labels)
	}
}
