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

// Package certs issues and rotates the webhook server's certificates: a CA
// and a serving certificate kept in one Secret that every replica reads, and
// the caBundle of the webhook configurations and CRDs that trust that CA.
package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// clockSkew backdates every certificate, so that an API server whose clock
// is a little behind ours still accepts a certificate issued this instant.
const clockSkew = 5 * time.Minute

// keyPair is a certificate with its private key, in PEM and parsed.
type keyPair struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
	key             crypto.Signer
}

// parseKeyPair reads a certificate and its key and checks that they belong
// together.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errors.New("missing")
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, err
	}
	parsed, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, errors.New("private key cannot sign")
	}
	pub, ok := certs[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("private key does not match the certificate")
	}
	return &keyPair{certPEM: certPEM, keyPEM: keyPEM, cert: certs[0], key: key}, nil
}

// newKey makes an ECDSA P-256 key: fast to generate, which matters when a
// replica issues at start-up.
func newKey() (crypto.Signer, []byte, error) {
	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, err
	}
	return key.(crypto.Signer), keyPEM, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(math.MaxInt64))
	if err != nil {
		return nil, err
	}
	return n.Add(n, big.NewInt(1)), nil
}

// newCA issues a self-signed CA valid for validity from now. client-go's
// certutil.NewSelfSignedCACert always makes ten-year CAs; rotation needs a
// chosen lifetime, so the template is ours.
func newCA(commonName string, now time.Time, validity time.Duration) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", commonName, now.Unix())},
		NotBefore:             now.Add(-clockSkew).UTC(),
		NotAfter:              now.Add(validity).UTC(),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, tmpl, key.Public(), key, keyPEM)
}

// newServingCert issues a serving certificate for names (DNS names or IPs)
// signed by ca, valid for validity but never past the CA.
func newServingCert(ca *keyPair, names []string, now time.Time, validity time.Duration) (*keyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    now.Add(-clockSkew).UTC(),
		NotAfter:     notAfter.UTC(),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	return sign(tmpl, ca.cert, key.Public(), ca.key, keyPEM)
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer, keyPEM []byte) (*keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	certPEM, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return nil, err
	}
	parsed, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	return &keyPair{certPEM: certPEM, keyPEM: keyPEM, cert: cert, key: parsed.(crypto.Signer)}, nil
}

// coversNames tells whether cert is valid for every one of names; more
// names are fine (another replica may need them).
func coversNames(cert *x509.Certificate, names []string) bool {
	got := map[string]bool{}
	for _, n := range certNames(cert) {
		got[n] = true
	}
	for _, n := range names {
		if !got[canonicalName(n)] {
			return false
		}
	}
	return true
}

// certNames are the DNS names and IP addresses cert is valid for, in its
// order.
func certNames(cert *x509.Certificate) []string {
	out := append([]string(nil), cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

// unionNames is want followed by every name of have it lacks, each once;
// want goes first so that the common name stays the replica's own.
func unionNames(have, want []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range append(append([]string(nil), want...), have...) {
		if c := canonicalName(n); !seen[c] {
			seen[c] = true
			out = append(out, n)
		}
	}
	return out
}

// canonicalName writes an IP address as net.IP.String does, so 127.0.0.1
// and ::ffff:127.0.0.1 compare equal; DNS names are kept as they are.
func canonicalName(n string) string {
	if ip := net.ParseIP(n); ip != nil {
		return ip.String()
	}
	return n
}

// signedBy tells whether cert verifies against ca alone.
func signedBy(cert, ca *x509.Certificate) bool {
	return cert.CheckSignatureFrom(ca) == nil
}
