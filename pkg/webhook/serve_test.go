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

package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2/ktesting"
)

// settableCerts is a CertKeyContentProvider a test changes at will.
type settableCerts struct {
	mu        sync.Mutex
	cert, key []byte
	listeners []dynamiccertificates.Listener
}

func (c *settableCerts) Name() string { return "test" }
func (c *settableCerts) AddListener(l dynamiccertificates.Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}
func (c *settableCerts) CurrentCertKeyContent() ([]byte, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, c.key
}
func (c *settableCerts) set(cert, key []byte) {
	c.mu.Lock()
	c.cert, c.key = cert, key
	ls := c.listeners
	c.mu.Unlock()
	for _, l := range ls {
		l.Enqueue()
	}
}

// newCert returns a serving certificate for 127.0.0.1 and a pool trusting it.
func newCert(t *testing.T) (cert, key []byte, roots *x509.CertPool, leaf *x509.Certificate) {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(cert)
	if err != nil || len(certs) != 2 {
		t.Fatalf("parsing the generated chain: %v", err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(certs[1])
	return cert, key, roots, certs[0]
}

// servedLeaf connects anew (no connection reuse) and returns the certificate
// the server presents, verified against roots.
func servedLeaf(addr net.Addr, roots *x509.CertPool) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func TestServeReloadsCertificateWithoutRestart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	s := NewServer()
	s.HandleAdmission("/validate/apps", "test-serve", AdmissionFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return Allowed()
	}))
	check := s.CertificateCheck()
	if err := check.Check(nil); err == nil {
		t.Fatal("certificate check passed before Serve")
	}

	certs := &settableCerts{}
	addr, err := s.Serve(ctx, "127.0.0.1:0", certs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr() == nil || s.Addr().String() != addr.String() {
		t.Errorf("Addr() = %v, want %v", s.Addr(), addr)
	}

	// No certificate yet: not ready, and handshakes fail.
	if err := check.Check(nil); err == nil {
		t.Error("certificate check passed with no certificate")
	}
	if _, err := servedLeaf(addr, x509.NewCertPool()); err == nil {
		t.Error("TLS handshake succeeded with no certificate")
	}

	cert1, key1, roots1, leaf1 := newCert(t)
	certs.set(cert1, key1)
	waitForLeaf(ctx, t, addr, roots1, leaf1)
	if err := check.Check(nil); err != nil {
		t.Errorf("certificate check fails with a certificate loaded: %v", err)
	}

	// An HTTPS request reaches the webhook.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots1}}, Timeout: 10 * time.Second}
	res, err := client.Post("https://"+addr.String()+"/validate/apps", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || res.ProtoMajor != 1 {
		t.Errorf("empty review over HTTPS: %s %s, want 400 over HTTP/1.1", res.Proto, res.Status)
	}

	// A renewed certificate is served on new connections, no restart.
	cert2, key2, roots2, leaf2 := newCert(t)
	certs.set(cert2, key2)
	waitForLeaf(ctx, t, addr, roots2, leaf2)

	// Stopped once no connection has come for acceptQuiet; dialling here
	// meanwhile would keep it open, as a caller still routed here should.
	cancel()
	select {
	case <-s.Stopped():
	case <-time.After(MaxStopTime() + 10*time.Second):
		t.Fatal("the server did not stop after the context ended")
	}
	if conn, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		conn.Close()
		t.Error("still listening after the server stopped")
	}
}

func waitForLeaf(ctx context.Context, t *testing.T, addr net.Addr, roots *x509.CertPool, want *x509.Certificate) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		leaf, err := servedLeaf(addr, roots)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return leaf.Equal(want), nil
	})
	if err != nil {
		t.Fatalf("the new certificate was not served: %v (last error %v)", err, lastErr)
	}
}

func TestCertificateCheckRejectsExpired(t *testing.T) {
	cert, key, _, leaf := newCert(t)
	certs := &settableCerts{cert: cert, key: key}
	ctrl := dynamiccertificates.NewDynamicServingCertificateController(&tls.Config{}, nil, certs, nil, nil)
	if err := ctrl.RunOnce(); err != nil {
		t.Fatal(err)
	}
	if err := checkServedCertificate(ctrl, leaf.NotAfter.Add(-time.Minute)); err != nil {
		t.Errorf("valid certificate: %v", err)
	}
	if err := checkServedCertificate(ctrl, leaf.NotAfter.Add(time.Minute)); err == nil {
		t.Error("expired certificate passed the check")
	}
}

// The API server's webhook client, like every client-go transport, keeps an
// idle connection for net/http's default; the server must keep it longer, or
// its closing races with a request sent on it (an EOF nobody retries).
func TestIdleTimeoutOutlastsTheAPIServersClient(t *testing.T) {
	client := http.DefaultTransport.(*http.Transport).IdleConnTimeout
	if idleTimeout <= client {
		t.Errorf("the webhook server closes idle connections after %v, the API server's client after %v: the server must wait longer", idleTimeout, client)
	}
}
