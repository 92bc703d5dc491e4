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
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2/ktesting"
)

// TestStartingWithoutACertificateIsNotAnError: a replica starts before the
// certificate Secret is filled. That is expected, so it must not log errors
// (on kind, both replicas logged one every few milliseconds until the Secret
// was filled), and the certificate is served as soon as it arrives.
func TestStartingWithoutACertificateIsNotAnError(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	saved := utilruntime.ErrorHandlers
	utilruntime.ErrorHandlers = append(append([]utilruntime.ErrorHandler(nil), saved...),
		func(_ context.Context, err error, msg string, _ ...interface{}) {
			if err != nil && strings.Contains(err.Error(), "serving certificate") {
				mu.Lock()
				logged = append(logged, msg+": "+err.Error())
				mu.Unlock()
			}
		})
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	certs := &settableCerts{}
	cfg, _, err := ReloadingTLSConfig(ctx, certs)
	if err == nil {
		t.Fatal("no error for a source holding no certificate")
	}
	// An observation window, not a synchronisation: the old code's retries
	// (5, 10, 20, 40, 80, 160 ms apart) would all have logged by now.
	time.Sleep(300 * time.Millisecond)

	addr := serveTLS(t, cfg)
	cert, key, roots, leaf := newCert(t)
	certs.set(cert, key)
	waitForLeaf(ctx, t, addr, roots, leaf)
	mu.Lock()
	defer mu.Unlock()
	if len(logged) > 0 {
		t.Errorf("%d errors logged while the certificate was awaited, first: %s", len(logged), logged[0])
	}
}

// fillsAfterFirstRead is filled with its certificate right after its first
// read: the Secret arriving while the first load runs.
type fillsAfterFirstRead struct {
	settableCerts
	once      sync.Once
	cert, key []byte
}

func (c *fillsAfterFirstRead) CurrentCertKeyContent() ([]byte, []byte) {
	cert, key := c.settableCerts.CurrentCertKeyContent()
	c.once.Do(func() { c.set(c.cert, c.key) })
	return cert, key
}

// TestACertificateArrivingDuringTheFirstLoadIsServed: content that arrives
// between the first (empty) load and the start of the reloader is not missed.
func TestACertificateArrivingDuringTheFirstLoadIsServed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cert, key, roots, leaf := newCert(t)
	certs := &fillsAfterFirstRead{cert: cert, key: key}
	cfg, _, err := ReloadingTLSConfig(ctx, certs)
	if err == nil {
		t.Fatal("the first load found a certificate; the test needs it empty")
	}
	waitForLeaf(ctx, t, serveTLS(t, cfg), roots, leaf)
}

// serveTLS accepts connections with cfg until the test ends, completing each
// handshake and closing it.
func serveTLS(t *testing.T, cfg *tls.Config) net.Addr {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	return ln.Addr()
}
