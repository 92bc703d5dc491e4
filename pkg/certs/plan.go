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
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
)

// Keys of the certificate Secret.
const (
	// CACertKey and CAKeyKey hold the CA that signs the serving certificate.
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
	// NextCACertKey and NextCAKeyKey hold the CA that will sign the next
	// serving certificate. It enters the bundle long before it signs
	// anything, so that every API server trusts it by then.
	NextCACertKey = "ca-next.crt"
	NextCAKeyKey  = "ca-next.key"
	// CABundleKey holds every CA the API server must trust: the current one,
	// the next one, and retired ones until they expire, so a replica still
	// serving a certificate of the previous CA is trusted while it switches.
	CABundleKey = "ca-bundle.crt"
	// TLSCertKey and TLSKeyKey hold the serving certificate.
	TLSCertKey = corev1.TLSCertKey
	TLSKeyKey  = corev1.TLSPrivateKeyKey
)

// Policy says what certificates to keep and for how long.
//
// The schedule is derived only from the certificates in the Secret, so every
// replica computes the same one: a serving certificate is renewed after two
// thirds of its life; a CA's successor is issued and added to the bundle at
// half of the CA's life and takes over at two thirds, once every webhook
// configuration and CRD trusts it; a retired CA stays in the bundle until it
// expires.
type Policy struct {
	// Names are the DNS names and IP addresses the serving certificate is for.
	Names        []string
	CAValidity   time.Duration
	CertValidity time.Duration
}

// Validate reports a policy that cannot be followed.
func (p Policy) Validate() error {
	var errs []error
	if len(p.Names) == 0 {
		errs = append(errs, errors.New("no names for the webhook serving certificate"))
	}
	if p.CAValidity <= 0 || p.CertValidity <= 0 {
		errs = append(errs, fmt.Errorf("certificate validities must be positive, got CA %s and serving %s", p.CAValidity, p.CertValidity))
	}
	return errors.Join(errs...)
}

// TrustFunc tells whether every webhook configuration and CRD already
// trusts ca.
type TrustFunc func(ca *x509.Certificate) bool

// Plan returns the Secret data that should replace data at now and what
// changed; no changes means data is right as it is. Keys Plan does not own
// are kept.
func (p Policy) Plan(now time.Time, data map[string][]byte, trusted TrustFunc) (map[string][]byte, []string, error) {
	var changes []string
	ca, caErr := parseKeyPair(data[CACertKey], data[CAKeyKey])
	next, nextErr := parseKeyPair(data[NextCACertKey], data[NextCAKeyKey])
	if nextErr != nil && len(data[NextCACertKey])+len(data[NextCAKeyKey]) > 0 {
		changes = append(changes, "dropped an unusable next CA: "+nextErr.Error())
	}
	if next != nil && !now.Before(next.cert.NotAfter) {
		next = nil
		changes = append(changes, "dropped an expired next CA")
	}

	switch {
	case caErr != nil || !now.Before(ca.cert.NotAfter):
		reason := "expired"
		if caErr != nil {
			reason = caErr.Error()
		}
		if next != nil {
			ca, next = next, nil
			changes = append(changes, "promoted the next CA because the current one is unusable: "+reason)
			break
		}
		var err error
		if ca, err = newCA("webhook-ca", now, p.CAValidity); err != nil {
			return nil, nil, err
		}
		changes = append(changes, "issued a CA: "+reason)
	case next != nil && !now.Before(fraction(ca.cert, 2, 3)) && trusted(next.cert):
		ca, next = next, nil
		changes = append(changes, "promoted the next CA")
	}
	if next == nil && !now.Before(fraction(ca.cert, 1, 2)) {
		var err error
		if next, err = newCA("webhook-ca", now, p.CAValidity); err != nil {
			return nil, nil, err
		}
		changes = append(changes, "issued the next CA into the bundle")
	}

	leaf, leafErr := parseKeyPair(data[TLSCertKey], data[TLSKeyKey])
	var renew string
	names := p.Names
	switch {
	case leafErr != nil:
		renew = "serving certificate unusable: " + leafErr.Error()
	case !signedBy(leaf.cert, ca.cert):
		renew = "serving certificate not signed by the current CA"
	case !coversNames(leaf.cert, p.Names):
		// Keep the names another replica needs (a rolling upgrade that
		// changes the names runs both kinds at once), so that replicas
		// converge on one certificate instead of replacing each other's.
		renew = "serving certificate lacks names"
		names = unionNames(certNames(leaf.cert), p.Names)
	case !now.Before(fraction(leaf.cert, 2, 3)):
		renew = "serving certificate due for renewal"
	}
	if renew != "" {
		var err error
		if leaf, err = newServingCert(ca, names, now, p.CertValidity); err != nil {
			return nil, nil, err
		}
		changes = append(changes, renew)
	}

	bundle, err := bundleOf(now, ca, next, data[CABundleKey])
	if err != nil {
		return nil, nil, err
	}

	out := make(map[string][]byte, len(data)+7)
	for k, v := range data {
		out[k] = v
	}
	out[CACertKey], out[CAKeyKey] = ca.certPEM, ca.keyPEM
	out[TLSCertKey], out[TLSKeyKey] = leaf.certPEM, leaf.keyPEM
	out[CABundleKey] = bundle
	delete(out, NextCACertKey)
	delete(out, NextCAKeyKey)
	if next != nil {
		out[NextCACertKey], out[NextCAKeyKey] = next.certPEM, next.keyPEM
	}
	if !bytes.Equal(bundle, data[CABundleKey]) {
		changes = append(changes, "updated the CA bundle")
	}
	if len(changes) == 0 {
		return data, nil, nil
	}
	return out, changes, nil
}

// bundleOf is the current CA, the next one, and every CA of the old bundle
// that has not expired, in that order and each once.
func bundleOf(now time.Time, ca, next *keyPair, old []byte) ([]byte, error) {
	certs := []*x509.Certificate{ca.cert}
	if next != nil {
		certs = append(certs, next.cert)
	}
	previous, _ := certutil.ParseCertsPEM(old) // an unreadable bundle is replaced
	for _, c := range previous {
		if now.Before(c.NotAfter) && !containsCert(certs, c) {
			certs = append(certs, c)
		}
	}
	return certutil.EncodeCertificates(certs...)
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, have := range certs {
		if have.Equal(c) {
			return true
		}
	}
	return false
}

// NextCheck is when Plan may next have something to do for data, at the
// latest: a renewal, a CA's successor or promotion, or a CA leaving the
// bundle. Promotion waiting for trust is re-checked when a target changes.
func NextCheck(now time.Time, data map[string][]byte) time.Time {
	ca, err := parseKeyPair(data[CACertKey], data[CAKeyKey])
	if err != nil {
		return now
	}
	at := ca.cert.NotAfter
	if next, err := parseKeyPair(data[NextCACertKey], data[NextCAKeyKey]); err == nil {
		at = earliest(at, fraction(ca.cert, 2, 3), next.cert.NotAfter)
	} else {
		at = earliest(at, fraction(ca.cert, 1, 2))
	}
	if leaf, err := parseKeyPair(data[TLSCertKey], data[TLSKeyKey]); err == nil {
		at = earliest(at, fraction(leaf.cert, 2, 3))
	}
	bundle, _ := certutil.ParseCertsPEM(data[CABundleKey])
	for _, c := range bundle {
		at = earliest(at, c.NotAfter)
	}
	if at.Before(now) {
		return now
	}
	return at
}

func earliest(t time.Time, others ...time.Time) time.Time {
	for _, o := range others {
		if o.Before(t) {
			t = o
		}
	}
	return t
}

// fraction is the instant num/den of the way through cert's life, counted
// from when it was issued (NotBefore is backdated by clockSkew).
func fraction(cert *x509.Certificate, num, den int64) time.Time {
	issued := cert.NotBefore.Add(clockSkew)
	if issued.After(cert.NotAfter) {
		issued = cert.NotBefore
	}
	return issued.Add(cert.NotAfter.Sub(issued) * time.Duration(num) / time.Duration(den))
}
