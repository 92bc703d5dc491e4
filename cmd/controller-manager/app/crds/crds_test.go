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

package crds

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

// A CRD holding objects stored at another version than its storage
// version is not released: without conversion they would be read as the
// storage version. Once only the storage version is stored, it is. Both
// CRDs store v1 and were stored at v1beta1 before.
func TestReleaseRefusesWhileAnotherVersionIsStored(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		crd     string
		stored  []string
		wantErr string
	}{
		{crd: "apps.ingress.example.com", stored: []string{"v1beta1", "v1"}, wantErr: "objects are still stored as v1beta1 " +
			"(status.storedVersions [v1beta1 v1]); run the manager until it has migrated them, or hack/migrate-storage.sh, then retry"},
		{crd: "apps.ingress.example.com", stored: []string{"v1"}},
		{crd: "pipelines.distri-infer.ndsl.cn", stored: []string{"v1beta1", "v1"}, wantErr: "objects are still stored as v1beta1 " +
			"(status.storedVersions [v1beta1 v1]); run the manager until it has migrated them, or hack/migrate-storage.sh, then retry"},
		{crd: "pipelines.distri-infer.ndsl.cn", stored: []string{"v1"}},
	} {
		t.Run(tc.crd+"/"+strings.Join(tc.stored, ","), func(t *testing.T) {
			// Not NewClientset: its field manager has no schema for CRDs.
			client := fake.NewSimpleClientset(&apiextensionsv1.CustomResourceDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: tc.crd},
				Spec: apiextensionsv1.CustomResourceDefinitionSpec{
					Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
						{Name: "v1beta1", Served: true}, {Name: "v1", Served: true, Storage: true}},
					Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter},
				},
				Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: tc.stored},
			})
			err := releaseCRD(ctx, client.ApiextensionsV1().CustomResourceDefinitions(), tc.crd)
			crd, getErr := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, tc.crd, metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			released := !crd.Spec.Versions[0].Served && crd.Spec.Conversion.Strategy == apiextensionsv1.NoneConverter
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("release = %v, want %q", err, tc.wantErr)
				}
				if released {
					t.Errorf("released anyway: %+v", crd.Spec)
				}
				return
			}
			if err != nil || !released {
				t.Errorf("release = %v, spec %+v; want v1beta1 no longer served and conversion None", err, crd.Spec)
			}
		})
	}
}
