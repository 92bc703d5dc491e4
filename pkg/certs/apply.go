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
	"context"
	"encoding/json"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1ac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	admissionregistrationv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
)

// The caBundle is written by server-side apply of the caBundles and the
// owner marker alone, so every other field (another manager's, or one this
// client does not know) is left as it is. The resourceVersion read from the
// cache makes each apply a compare-then-write: the owner check and the list
// of webhooks it was built from are still true when it lands.
var applyOptions = metav1.ApplyOptions{FieldManager: fieldManager, Force: true}

func ownerMarker(owner string) map[string]string {
	return map[string]string{CABundleOwnerAnnotation: owner}
}

func applyMutatingBundle(ctx context.Context, kube kubernetes.Interface, c *admissionregistrationv1.MutatingWebhookConfiguration, bundle []byte, owner string) (runtime.Object, error) {
	ac := admissionregistrationv1ac.MutatingWebhookConfiguration(c.Name).
		WithResourceVersion(c.ResourceVersion).WithAnnotations(ownerMarker(owner))
	for _, w := range c.Webhooks {
		ac.WithWebhooks(admissionregistrationv1ac.MutatingWebhook().WithName(w.Name).
			WithClientConfig(admissionregistrationv1ac.WebhookClientConfig().WithCABundle(bundle...)))
	}
	return kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Apply(ctx, ac, applyOptions)
}

func applyValidatingBundle(ctx context.Context, kube kubernetes.Interface, c *admissionregistrationv1.ValidatingWebhookConfiguration, bundle []byte, owner string) (runtime.Object, error) {
	ac := admissionregistrationv1ac.ValidatingWebhookConfiguration(c.Name).
		WithResourceVersion(c.ResourceVersion).WithAnnotations(ownerMarker(owner))
	for _, w := range c.Webhooks {
		ac.WithWebhooks(admissionregistrationv1ac.ValidatingWebhook().WithName(w.Name).
			WithClientConfig(admissionregistrationv1ac.WebhookClientConfig().WithCABundle(bundle...)))
	}
	return kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Apply(ctx, ac, applyOptions)
}

func applyCRDBundle(ctx context.Context, crds apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition, bundle []byte, owner string) (runtime.Object, error) {
	ac := apiextensionsv1ac.CustomResourceDefinition(crd.Name).
		WithResourceVersion(crd.ResourceVersion).WithAnnotations(ownerMarker(owner)).
		WithSpec(apiextensionsv1ac.CustomResourceDefinitionSpec().
			WithConversion(apiextensionsv1ac.CustomResourceConversion().
				WithWebhook(apiextensionsv1ac.WebhookConversion().
					WithClientConfig(apiextensionsv1ac.WebhookClientConfig().WithCABundle(bundle...)))))
	return crds.ApiextensionsV1().CustomResourceDefinitions().Apply(ctx, ac, applyOptions)
}

// releasePatch is the JSON patch that drops this manager's managedFields
// entries from obj, so that the caBundle and the owner marker it wrote stay
// but are owned by no one; nil when it owns nothing there. Owned, a caBundle
// would keep alive what the installer's server-side apply removes (a webhook
// entry, a CRD's conversion webhook) as an invalid stub, and the upgrade
// would fail; unowned, it goes with them and stays otherwise. The
// resourceVersion makes the patch a compare-then-write, as client-go's
// csaupgrade does, so that no other manager's entry is lost.
func releasePatch(obj runtime.Object) ([]byte, error) {
	meta, err := apimeta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	others := []metav1.ManagedFieldsEntry{}
	for _, f := range meta.GetManagedFields() {
		if f.Manager != fieldManager {
			others = append(others, f)
		}
	}
	if len(others) == len(meta.GetManagedFields()) {
		return nil, nil
	}
	var value any = others
	if len(others) == 0 {
		value = []map[string]any{{}} // an empty list would keep the entries; one empty entry clears them
	}
	return json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": value},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": meta.GetResourceVersion()},
	})
}
