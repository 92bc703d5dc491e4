package webhook

import (
	"context"
	"crypto/tls"
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

	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
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
	cert, key, roots, leaf := newCert(t)
	certs.set(cert, key)
	waitForLeaf(ctx, t, ln.Addr(), roots, leaf)
	mu.Lock()
	defer mu.Unlock()
	if len(logged) > 0 {
		t.Errorf("%d errors logged while the certificate was awaited, first: %s", len(logged), logged[0])
	}
}
