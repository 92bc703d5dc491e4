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

package crd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/crds"
)

// widgets is a CRD of two versions, standing in for the App CRD across a
// release that moved its storage version.
func widgets(storage string) *apiextensionsv1.CustomResourceDefinition {
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: func() *bool { b := true; return &b }()}}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.rollback.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "rollback.test", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: storage == "v1", Schema: schema},
				{Name: "v1beta1", Served: true, Storage: storage == "v1beta1", Schema: schema},
			},
		},
	}
}

// A helm rollback (or upgrade) to a chart version that has the CRDs as
// release resources, as before the crds hook, applies them server-side
// without forcing: after the hook's apply of other versions (a storage
// version moved), that apply must not conflict with the hook on
// spec.versions, or the rollback fails.
func TestRollbackAppliesOtherVersionsOverTheHook(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data, err := yaml.Marshal(widgets("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "widgets.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := crds.Run(ctx, cp.Config, []string{"apply", "--dir", dir}); err != nil {
		t.Fatal(err)
	}
	client := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	t.Cleanup(func() { _ = client.Delete(context.Background(), "widgets.rollback.test", metav1.DeleteOptions{}) })

	older, err := json.Marshal(widgets("v1beta1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.Patch(ctx, "widgets.rollback.test", types.ApplyPatchType, older, metav1.PatchOptions{FieldManager: "helm"})
	if err != nil {
		t.Fatalf("applying the earlier chart's CRD as helm does: %v", err)
	}
	if got.Spec.Versions[1].Name != "v1beta1" || !got.Spec.Versions[1].Storage {
		t.Errorf("versions after the earlier chart's apply: %+v, want v1beta1 stored", got.Spec.Versions)
	}
	// And forward again: the hook's next apply sets its versions back.
	if err := crds.Run(ctx, cp.Config, []string{"apply", "--dir", dir}); err != nil {
		t.Fatal(err)
	}
	if got, err = client.Get(ctx, "widgets.rollback.test", metav1.GetOptions{}); err != nil || !got.Spec.Versions[0].Storage {
		t.Errorf("versions after the hook applied again: %+v (%v), want v1 stored", got.Spec.Versions, err)
	}
}
