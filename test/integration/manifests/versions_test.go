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

package manifests

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// crdsOf returns the CRDs a kustomization builds to; components/X is
// manifests/default with that component.
func crdsOf(t *testing.T, dir string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []*apiextensionsv1.CustomResourceDefinition
	var docs []map[string]any
	if c, ok := strings.CutPrefix(dir, "components/"); ok {
		_, docs = compose(t, "", c)
	} else {
		docs = build(t, dir)
	}
	for _, doc := range docs {
		if doc["kind"] == "CustomResourceDefinition" {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			convert(t, doc, crd)
			out = append(out, crd)
		}
	}
	if len(out) == 0 {
		t.Fatalf("manifests/%s has no CRDs", dir)
	}
	return out
}

// servesWithoutConversion names the versions other than the storage version
// that crd serves while it converts with strategy None: what such a
// version reads is the stored version's data relabelled, and what it
// writes loses the fields the stored version does not have.
func servesWithoutConversion(crd *apiextensionsv1.CustomResourceDefinition) []string {
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return nil
	}
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served && !v.Storage {
			out = append(out, v.Name)
		}
	}
	return out
}

// Issue 21, item 4: no install path serves a version but the stored one
// without conversion. make install (and make run against a cluster)
// applies manifests/crd: each CRD serves its storage version alone (v1 for
// Apps and Pipelines). make deploy, and manifests/default with the
// cert-manager component, configure the conversion webhook and serve both.
func TestEveryInstallPathServesOtherVersionsOnlyWithConversion(t *testing.T) {
	for _, dir := range []string{"crd", "default", "components/cert-manager", "components/cleanup", "components/prometheus"} {
		for _, crd := range crdsOf(t, dir) {
			if vs := servesWithoutConversion(crd); len(vs) > 0 {
				t.Errorf("manifests/%s: CRD %s serves %v without a conversion webhook", dir, crd.Name, vs)
			}
		}
	}
	for _, dir := range []string{"default", "components/cert-manager"} {
		for _, crd := range crdsOf(t, dir) {
			if !served(crd, "v1") || !served(crd, "v1beta1") || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
				t.Errorf("manifests/%s: CRD %s: v1 served %t, v1beta1 served %t, conversion %+v; want both served through the webhook",
					dir, crd.Name, served(crd, "v1"), served(crd, "v1beta1"), crd.Spec.Conversion)
			}
		}
	}
}

func served(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Served
		}
	}
	return false
}

// The same against the API server: manifests/crd alone, as make install
// applies it, serves only the storage version (a LIST of the other is
// NotFound and discovery does not list it); then manifests/default's CRDs
// over it, as make deploy applies them, serve the other with strategy
// Webhook.
func TestAPIServerServesOtherVersionsOnlyWithConversion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ext, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	installed := crdsOf(t, "crd")
	var names []string
	for _, crd := range installed {
		names = append(names, crd.Name)
		t.Cleanup(func() { _ = crds.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}) })
	}
	if err := controlplane.InstallCRDs(ctx, cp.Config, installed); err != nil {
		t.Fatal(err)
	}
	for _, crd := range installed {
		gr := schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
		stored, other := versionsOf(crd)
		waitDiscovered(t, gr.WithVersion(stored).GroupVersion(), gr.Resource)
		if _, err := dyn.Resource(gr.WithVersion(other)).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("manifests/crd: LIST %s %s: %v, want NotFound (not served)", gr, other, err)
		}
		if _, err := cp.Client.Discovery().ServerResourcesForGroupVersion(gr.Group + "/" + other); !apierrors.IsNotFound(err) {
			t.Errorf("manifests/crd: discovery of %s/%s: %v, want NotFound", gr.Group, other, err)
		}
	}

	// make deploy over make install: the API server takes manifests/default's CRDs.
	for _, want := range crdsOf(t, "default") {
		got, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Spec = want.Spec
		got, err = crds.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("updating CRD %s to manifests/default's: %v", want.Name, err)
		}
		_, other := versionsOf(got)
		if !served(got, other) || got.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			t.Errorf("manifests/default: CRD %s as stored: %s served %t, conversion %s; want it served with strategy Webhook",
				got.Name, other, served(got, other), got.Spec.Conversion.Strategy)
		}
		waitDiscovered(t, schema.GroupVersion{Group: got.Spec.Group, Version: other}, got.Spec.Names.Plural)
	}
	if err := controlplane.WaitForCRDs(ctx, ext, time.Minute, names...); err != nil {
		t.Fatal(err)
	}
}

// versionsOf returns the CRD's storage version and its other one.
func versionsOf(crd *apiextensionsv1.CustomResourceDefinition) (stored, other string) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			stored = v.Name
		} else {
			other = v.Name
		}
	}
	return stored, other
}

// waitDiscovered waits until discovery lists resource in gv.
func waitDiscovered(t *testing.T, gv schema.GroupVersion, resource string) {
	t.Helper()
	framework.Eventually(t, time.Minute, gv.String()+" "+resource+" in discovery", func(context.Context) (bool, error) {
		list, err := cp.Client.Discovery().ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			return false, nil
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return true, nil
			}
		}
		return false, nil
	})
}
