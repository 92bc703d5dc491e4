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
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/server/healthz"
	certutil "k8s.io/client-go/util/cert"
)

// TrustedCheck is a /readyz check that passes once every caBundle of the
// targets this install owns verifies the certificate served. Until then
// the API server, routed here by the Service, would refuse this replica's
// TLS ("x509: certificate signed by unknown authority"): a replica that
// loaded the Secret before the writer injected its CA must not be ready.
func (m *Manager) TrustedCheck() healthz.HealthChecker {
	return healthz.NamedCheck("webhook-ca-bundle", func(*http.Request) error { return m.servedCertificateTrusted() })
}

func (m *Manager) servedCertificateTrusted() error {
	certPEM, _ := m.content.CurrentCertKeyContent()
	chain, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return errors.New("no webhook serving certificate loaded yet")
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	for _, t := range m.targets {
		if !t.informer.HasSynced() {
			return fmt.Errorf("%s %s not read yet", t.kind, t.name)
		}
		obj, exists, err := t.informer.GetStore().GetByKey(t.name)
		if err != nil {
			return err
		}
		if !exists {
			continue // not installed: nothing calls us through it
		}
		if meta, err := apimeta.Accessor(obj); err != nil {
			return err
		} else if owner := meta.GetAnnotations()[CABundleOwnerAnnotation]; owner != "" && owner != m.owner() {
			continue // another install's (reported by inject), not ours to wait for
		}
		for _, b := range t.bundles(obj.(runtime.Object)) {
			roots := x509.NewCertPool()
			if len(*b) == 0 || !roots.AppendCertsFromPEM(*b) {
				return fmt.Errorf("%s %s has no caBundle yet", t.kind, t.name)
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
			if _, err := chain[0].Verify(opts); err != nil {
				return fmt.Errorf("the caBundle of %s %s does not verify the served certificate yet: %w", t.kind, t.name, err)
			}
		}
	}
	return nil
}
