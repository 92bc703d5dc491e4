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

package webhookurl

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func parse(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestRewrite(t *testing.T) {
	vwc := parse(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: x}
webhooks:
- name: a
  clientConfig: {service: {name: svc, namespace: ns, path: /validate/apps}, caBundle: Zm9v}
- name: b
  clientConfig: {service: {name: svc, namespace: ns, path: /validate/pipelines}}
`)
	if ok, err := Rewrite(vwc, "https://127.0.0.1:9443/"); !ok || err != nil {
		t.Fatalf("Rewrite = %v, %v", ok, err)
	}
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	for i, want := range []string{"https://127.0.0.1:9443/validate/apps", "https://127.0.0.1:9443/validate/pipelines"} {
		cc := hooks[i].(map[string]any)["clientConfig"].(map[string]any)
		if cc["url"] != want || cc["service"] != nil {
			t.Errorf("webhook %d: clientConfig %v, want url %s and no service", i, cc, want)
		}
	}
	if cc := hooks[0].(map[string]any)["clientConfig"].(map[string]any); cc["caBundle"] != "Zm9v" {
		t.Error("caBundle lost")
	}

	crd := parse(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: apps.ingress.example.com}
spec:
  conversion:
    strategy: Webhook
    webhook: {conversionReviewVersions: [v1], clientConfig: {service: {name: svc, namespace: ns, path: /convert/apps}}}
`)
	if ok, err := Rewrite(crd, "https://127.0.0.1:9443"); !ok || err != nil {
		t.Fatalf("Rewrite CRD = %v, %v", ok, err)
	}
	if url, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url"); url != "https://127.0.0.1:9443/convert/apps" {
		t.Errorf("CRD url %q", url)
	}

	plain := parse(t, `{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: x}, spec: {}}`)
	if ok, err := Rewrite(plain, "https://x"); ok || err != nil {
		t.Errorf("CRD without conversion webhook: %v, %v", ok, err)
	}
	if ok, _ := Rewrite(parse(t, `{apiVersion: v1, kind: Service, metadata: {name: x}}`), "https://x"); ok {
		t.Error("a Service has no webhooks")
	}
}
