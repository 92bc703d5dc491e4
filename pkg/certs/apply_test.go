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

package certs

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReleasePatch(t *testing.T) {
	helm := metav1.ManagedFieldsEntry{Manager: "helm", Operation: metav1.ManagedFieldsOperationApply}
	self := metav1.ManagedFieldsEntry{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationApply}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"owns nothing", []metav1.ManagedFieldsEntry{helm}, ""},
		{"beside another manager", []metav1.ManagedFieldsEntry{helm, self},
			`[{"op":"replace","path":"/metadata/managedFields","value":[{"manager":"helm","operation":"Apply"}]},{"op":"replace","path":"/metadata/resourceVersion","value":"7"}]`},
		{"alone", []metav1.ManagedFieldsEntry{self},
			`[{"op":"replace","path":"/metadata/managedFields","value":[{}]},{"op":"replace","path":"/metadata/resourceVersion","value":"7"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: "cfg", ResourceVersion: "7", ManagedFields: tc.entries}}
			got, err := releasePatch(obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("releasePatch:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
