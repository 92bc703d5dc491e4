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

// Package webhookurl points the manifests' webhooks at a URL instead of the
// in-cluster Service, for a manager running outside the cluster: `make run`
// and the end-to-end suite, where the API server calls 127.0.0.1.
package webhookurl

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Rewrite replaces every clientConfig.service of obj's webhooks (mutating
// and validating configurations, a CRD's conversion webhook) with the URL
// base + the service's path. It reports whether obj has webhooks.
func Rewrite(obj *unstructured.Unstructured, base string) (bool, error) {
	base = strings.TrimSuffix(base, "/")
	switch obj.GetKind() {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		hooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
		if err != nil {
			return false, err
		}
		for i, h := range hooks {
			hook, ok := h.(map[string]any)
			if !ok {
				return false, fmt.Errorf("%s %s: webhook %d is not an object", obj.GetKind(), obj.GetName(), i)
			}
			if err := rewriteClientConfig(hook, base); err != nil {
				return false, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
		return true, unstructured.SetNestedSlice(obj.Object, hooks, "webhooks")
	case "CustomResourceDefinition":
		webhook, found, err := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook")
		if err != nil || !found {
			return false, err
		}
		if err := rewriteClientConfig(webhook, base); err != nil {
			return false, fmt.Errorf("CRD %s: %w", obj.GetName(), err)
		}
		return true, unstructured.SetNestedMap(obj.Object, webhook, "spec", "conversion", "webhook")
	}
	return false, nil
}

func rewriteClientConfig(hook map[string]any, base string) error {
	path, found, err := unstructured.NestedString(hook, "clientConfig", "service", "path")
	if err != nil || !found {
		return fmt.Errorf("clientConfig.service.path missing: %v", err)
	}
	unstructured.RemoveNestedField(hook, "clientConfig", "service")
	return unstructured.SetNestedField(hook, base+path, "clientConfig", "url")
}
