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
	"bytes"
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

// A small test of the wiring with fake clients; the behaviour against a real
// API server (conflicts, RBAC, the API server calling the webhooks) is in
// test/integration/webhook.
func TestManagerIssuesServesAndInjects(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	kube := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a"}, {Name: "b"}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "a"}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "a"}}},
	)
	crds := apiextensionsfake.NewSimpleClientset( //nolint:staticcheck // NewClientset has no type information for CRDs
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "converted"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook:  &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{}},
			}}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}}},
	)
	opts := Options{
		Namespace: "ns", SecretName: "certs", Policy: testPolicy, CAConfigMap: "ca",
		Targets: Targets{MutatingWebhookConfigurations: []string{"cfg"}, ValidatingWebhookConfigurations: []string{"cfg"}, CRDs: []string{"converted", "plain"}},
	}
	m, err := NewManager(kube, crds, opts)
	if err != nil {
		t.Fatal(err)
	}
	go m.Run(ctx)

	var secret *corev1.Secret
	poll(t, "the Secret, served and injected everywhere", func(ctx context.Context) bool {
		secret, err = kube.CoreV1().Secrets("ns").Get(ctx, "certs", metav1.GetOptions{})
		if err != nil {
			return false
		}
		cert, _ := m.ServingCertificate().CurrentCertKeyContent()
		cm, err := kube.CoreV1().ConfigMaps("ns").Get(ctx, "ca", metav1.GetOptions{})
		return err == nil && cm.Data[CABundleKey] == string(secret.Data[CABundleKey]) &&
			bytes.Equal(cert, secret.Data[TLSCertKey]) && bundlesEqual(ctx, t, kube, crds, secret.Data[CABundleKey])
	})
	if secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %q", secret.Type)
	}
	plain, _ := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "plain", metav1.GetOptions{})
	if plain.Spec.Conversion.Webhook != nil {
		t.Error("a CRD without a conversion webhook got one")
	}
	other, _ := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "someone-elses", metav1.GetOptions{})
	if len(other.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Error("someone else's webhook configuration was touched")
	}

	vwc, _ := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "cfg", metav1.GetOptions{})
	vwc.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the blanked caBundle restored", func(ctx context.Context) bool {
		return bundlesEqual(ctx, t, kube, crds, secret.Data[CABundleKey])
	})
}

func bundlesEqual(ctx context.Context, t *testing.T, kube *fake.Clientset, crds *apiextensionsfake.Clientset, want []byte) bool {
	t.Helper()
	mwc, err1 := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "cfg", metav1.GetOptions{})
	vwc, err2 := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "cfg", metav1.GetOptions{})
	crd, err3 := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "converted", metav1.GetOptions{})
	if err1 != nil || err2 != nil || err3 != nil {
		return false
	}
	return bytes.Equal(mwc.Webhooks[0].ClientConfig.CABundle, want) && bytes.Equal(mwc.Webhooks[1].ClientConfig.CABundle, want) &&
		bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, want) && bytes.Equal(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, want)
}

func poll(t *testing.T, what string, cond func(context.Context) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
