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
	"crypto/x509"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	certutil "k8s.io/client-go/util/cert"
)

// Targets are the objects whose caBundle must trust the webhook CA. They are
// the manager's own: every webhook of a named configuration is its own.
type Targets struct {
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string
	// CRDs whose conversion webhook is the manager's; a CRD whose conversion
	// strategy is not Webhook is left alone.
	CRDs []string
}

// bundles returns pointers to the caBundles of an object's webhooks, so the
// same code reads, compares and sets them for every kind of target.
func mutatingBundles(c *admissionregistrationv1.MutatingWebhookConfiguration) []*[]byte {
	var out []*[]byte
	for i := range c.Webhooks {
		out = append(out, &c.Webhooks[i].ClientConfig.CABundle)
	}
	return out
}

func validatingBundles(c *admissionregistrationv1.ValidatingWebhookConfiguration) []*[]byte {
	var out []*[]byte
	for i := range c.Webhooks {
		out = append(out, &c.Webhooks[i].ClientConfig.CABundle)
	}
	return out
}

func crdBundles(crd *apiextensionsv1.CustomResourceDefinition) []*[]byte {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return nil
	}
	return []*[]byte{&conv.Webhook.ClientConfig.CABundle}
}

// needsBundle tells whether any of bundles differs from want.
func needsBundle(bundles []*[]byte, want []byte) bool {
	for _, b := range bundles {
		if !bytes.Equal(*b, want) {
			return true
		}
	}
	return false
}

// setBundle sets every bundle to want.
func setBundle(bundles []*[]byte, want []byte) {
	for _, b := range bundles {
		*b = bytes.Clone(want)
	}
}

// trustsCA tells whether every bundle holds ca.
func trustsCA(bundles []*[]byte, ca *x509.Certificate) bool {
	for _, b := range bundles {
		certs, err := certutil.ParseCertsPEM(*b)
		if err != nil || !containsCert(certs, ca) {
			return false
		}
	}
	return true
}
