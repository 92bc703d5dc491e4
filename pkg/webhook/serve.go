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
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// servingCertificates is what Serve needs of the TLS machinery: a TLS config
// per client hello, kept current by the dynamiccertificates controller.
type servingCertificates interface {
	GetConfigForClient(*tls.ClientHelloInfo) (*tls.Config, error)
}

// servingState is set once Serve has started.
type servingState struct {
	addr net.Addr
	tls  servingCertificates
	// stopped is closed once the server has shut down.
	stopped chan struct{}
}

// idleTimeout is how long the server keeps an idle connection: longer than
// the API server's webhook client keeps one (client-go's transports take
// net/http's 90 s), so that the client always closes first. Closing an idle
// connection races with a request being sent on it, which then fails (EOF)
// and is not retried. With both at 90 s, the likely cause of a conversion
// that failed with EOF in make test's chaos 90 s after a burst.
const idleTimeout = 2 * time.Minute

// Serve listens on address and serves the webhooks over TLS until ctx is
// done, with the certificate certs provides. Requests are served with
// ctx, so the caller keeps it alive through its lame-duck delay. A new certificate (a renewed
// one, or the first one when certs starts empty) is used for new
// connections without a restart. The listener is opened before Serve
// returns, so a bad address fails startup; until certs holds a certificate,
// TLS handshakes fail and CertificateCheck reports not ready.
func (s *Server) Serve(ctx context.Context, address string, certs dynamiccertificates.CertKeyContentProvider) (net.Addr, error) {
	logger := klog.FromContext(ctx)
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening on --webhook-address %s: %w", address, err)
	}

	tlsConfig, served, err := ReloadingTLSConfig(ctx, certs)
	if err != nil {
		logger.Info("No webhook serving certificate yet; serving once one is loaded", "source", certs.Name(), "reason", err.Error())
	}

	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		TLSConfig:         tlsConfig,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Webhook server stopped")
		}
	}()
	stopped := make(chan struct{})
	context.AfterFunc(ctx, func() {
		// Requests in flight finish (the API server's webhook timeout is
		// at most 30 s, 10 s by default); the caller has stopped routing
		// new ones here before ctx ends.
		defer close(stopped)
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	})
	s.serving.Store(&servingState{addr: ln.Addr(), tls: served, stopped: stopped})
	logger.Info("Serving webhooks", "address", ln.Addr().String(), "paths", s.Paths(), "certificate", certs.Name())
	return ln.Addr(), nil
}

// Addr is the address Serve listens on, nil before Serve.
func (s *Server) Addr() net.Addr {
	if st := s.serving.Load(); st != nil {
		return st.addr
	}
	return nil
}

// Stopped is closed once the server Serve started has shut down; nil
// before Serve.
func (s *Server) Stopped() <-chan struct{} {
	if st := s.serving.Load(); st != nil {
		return st.stopped
	}
	return nil
}

// CertificateCheck is a /readyz check that passes once the server serves a
// certificate that has not expired.
func (s *Server) CertificateCheck() healthz.HealthChecker {
	return healthz.NamedCheck("webhook-certificate", func(*http.Request) error {
		st := s.serving.Load()
		if st == nil {
			return errors.New("webhook server not started")
		}
		return checkServedCertificate(st.tls, time.Now())
	})
}

func checkServedCertificate(certs servingCertificates, now time.Time) error {
	// A server name makes GetConfigForClient skip its per-IP lookup.
	cfg, err := certs.GetConfigForClient(&tls.ClientHelloInfo{ServerName: "readyz.check"})
	if err != nil || cfg == nil || len(cfg.Certificates) == 0 {
		return errors.New("no webhook serving certificate loaded yet")
	}
	leaf := cfg.Certificates[0].Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cfg.Certificates[0].Certificate[0]); err != nil {
			return fmt.Errorf("webhook serving certificate unreadable: %w", err)
		}
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("webhook serving certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}
