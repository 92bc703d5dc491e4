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

package webhooks

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	appconversion "github.com/ndsl/controller-manager/apis/app/conversion"
	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// withoutValidation runs fn with the validating webhooks removed, as a
// cluster where they were off (or not yet installed) had them, and puts
// them back. The tests of this package run one at a time.
func withoutValidation(t *testing.T, fn func()) {
	t.Helper()
	ctx := context.Background()
	configs := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if err := configs.Delete(ctx, validatingName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := configs.Create(ctx, validatingConfig(webhookURL, webhookCA), metav1.CreateOptions{}); err != nil {
			t.Fatalf("putting the ValidatingWebhookConfiguration back: %v", err)
		}
		if err := waitWebhooksActive(ctx); err != nil {
			t.Fatalf("waiting for the validating webhook: %v", err)
		}
	}()
	// Until the API server drops the webhook, the image it refuses is refused.
	probe := appObject("v1beta1", "probe", map[string]any{"image": "Not A Reference", "enable_service": true})
	framework.Eventually(t, timeout, "the validating webhook to be gone", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(appsV1beta1).Namespace("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
	fn()
}

// Issue 21, item 4: the conversion's annotations are reserved. An
// undecodable one (written while the validating webhook was off) never fails
// a v1 LIST; the validating webhook refuses users' writes of them through
// v1beta1, and allows their removal, an unchanged value, and v1 writes
// (where the conversion, not the user, writes them).
func TestConversionAnnotationsAreReserved(t *testing.T) {
	setup(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	apps := dyn.Resource(appsV1beta1).Namespace(ns)
	const v1Spec = appconversion.V1SpecAnnotation
	// enable_ingress true, which the defaulting webhook inverts: a Service only.
	serviceOnly := map[string]any{"image": "nginx:1.27", "enable_service": true, "enable_ingress": true}

	withoutValidation(t, func() {
		bad := appObject("v1beta1", "bad", serviceOnly)
		bad.SetAnnotations(map[string]string{v1Spec: "not json", "team": "a"})
		if _, err := apps.Create(ctx, bad, strict); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := apps.Create(ctx, appObject("v1beta1", "good", serviceOnly), strict); err != nil {
		t.Fatal(err)
	}

	t.Run("an undecodable annotation does not fail a v1 LIST", func(t *testing.T) {
		list, err := dyn.Resource(appsV1).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("v1 LIST of Apps: %v", err)
		}
		if len(list.Items) != 2 {
			t.Fatalf("v1 LIST: %d Apps, want 2", len(list.Items))
		}
		for _, u := range list.Items {
			exposure, _, _ := unstructured.NestedString(u.Object, "spec", "exposure")
			if a := u.GetAnnotations(); exposure != "Service" || a[v1Spec] != "" {
				t.Errorf("App %s read as v1: exposure %q, annotations %v; want Service, the undecodable one ignored", u.GetName(), exposure, a)
			}
		}
	})

	refused := func(t *testing.T, err error, key string) {
		t.Helper()
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("got %v; want Invalid naming %s as reserved", err, key)
		}
	}

	t.Run("v1beta1 creates are refused", func(t *testing.T) {
		for _, key := range []string{appconversion.V1SpecAnnotation, appconversion.V1beta1SpecAnnotation} {
			obj := appObject("v1beta1", "stash", map[string]any{"image": "nginx:1.27", "enable_service": true})
			obj.SetAnnotations(map[string]string{key: `{"exposure":"Service"}`})
			_, err := apps.Create(ctx, obj, strict)
			refused(t, err, key)
		}
		for _, key := range []string{pipelineconversion.V1beta1SpecAnnotation, pipelineconversion.V1beta1StatusAnnotation} {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "distri-infer.ndsl.cn/v1beta1", "kind": "Pipeline",
				"metadata": map[string]any{"name": "stash", "annotations": map[string]any{key: "{}"}},
				"spec": map[string]any{
					"steps":        []any{map[string]any{"model": "m", "image": "nginx:1.27"}},
					"modelStorage": map[string]any{"type": "nfs", "csiParameter": map[string]any{"server": "s", "share": "/x"}},
				},
			}}
			_, err := dyn.Resource(pipelinesV1beta1).Create(ctx, obj, strict)
			refused(t, err, key)
		}
	})

	t.Run("v1beta1 updates that add or change one are refused", func(t *testing.T) {
		_, err := apps.Patch(ctx, "good", types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1Spec+`":"{}"}}}`), metav1.PatchOptions{})
		refused(t, err, v1Spec)
		_, err = apps.Patch(ctx, "bad", types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1Spec+`":"{}"}}}`), metav1.PatchOptions{})
		refused(t, err, v1Spec)
	})

	t.Run("an unchanged value is allowed", func(t *testing.T) {
		// kubectl get -o yaml | kubectl apply: the object sent back as read.
		u, err := apps.Get(ctx, "bad", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetLabels(map[string]string{"edited": "yes"})
		if _, err := apps.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Errorf("an update that keeps %s as it was: %v", v1Spec, err)
		}
	})

	t.Run("removing one is allowed", func(t *testing.T) {
		if _, err := apps.Patch(ctx, "bad", types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1Spec+`":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("removing %s: %v", v1Spec, err)
		}
		if a := getApp(t, ns, "bad").Annotations; a[v1Spec] != "" || a["team"] != "a" {
			t.Errorf("annotations after the removal: %v", a)
		}
	})

	t.Run("v1 writes are allowed", func(t *testing.T) {
		// Through v1 the webhook sees what the conversion wrote, whatever
		// the v1 object carried.
		obj := appObject("v1", "via-v1", map[string]any{"image": "nginx:1.27", "exposure": "Service"})
		obj.SetAnnotations(map[string]string{appconversion.V1beta1SpecAnnotation: `{"enable_service":true}`})
		if _, err := dyn.Resource(appsV1).Namespace(ns).Create(ctx, obj, strict); err != nil {
			t.Fatalf("creating an App through v1: %v", err)
		}
		if _, err := dyn.Resource(appsV1).Namespace(ns).Patch(ctx, "via-v1", types.MergePatchType, []byte(`{"spec":{"exposure":"Ingress"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("updating an App through v1: %v", err)
		}
	})
}
