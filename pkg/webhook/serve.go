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
	"sync/atomic"
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

// After its serving context ends, the server still accepts connections until
// none has come for acceptQuiet, and for acceptAfterStop at most: kube-proxy
// may still send a new connection here after the lame duck (seen under load
// in a rollout), and the API server calls webhooks over HTTP/1.1 and does not
// retry a refused connection. Each answer then closes its connection
// (CloseConnections). Requests in flight then get shutdownTimeout.
const (
	acceptQuiet     = time.Second
	acceptAfterStop = 10 * time.Second
	shutdownTimeout = 10 * time.Second
)

// MaxStopTime is how long the webhook server may take to stop after its
// serving context ends; the pod's grace period must leave room for it.
func MaxStopTime() time.Duration { return acceptAfterStop + shutdownTimeout }

// Serve listens on address and serves the webhooks over TLS until ctx is
// done, with the certificate certs provides, then stops as MaxStopTime says.
// Requests are not cancelled with ctx: the caller keeps ctx alive through its
// lame-duck delay, and requests in flight finish after it. A new certificate
// (a renewed one, or the first one when certs starts empty) is used for new
// connections without a restart. The listener is opened before Serve
// returns, so a bad address fails startup; until certs holds a certificate,
// TLS handshakes fail and CertificateCheck reports not ready.
func (s *Server) Serve(ctx context.Context, address string, certs dynamiccertificates.CertKeyContentProvider) (net.Addr, error) {
	logger := klog.FromContext(ctx)
	tcp, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening on --webhook-address %s: %w", address, err)
	}
	ln := &acceptClock{Listener: tcp}

	tlsConfig, served, err := ReloadingTLSConfig(ctx, certs)
	if err != nil {
		logger.Info("No webhook serving certificate yet; serving once one is loaded", "source", certs.Name(), "reason", err.Error())
	}

	requests := context.WithoutCancel(ctx)
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		TLSConfig:         tlsConfig,
		BaseContext:       func(net.Listener) context.Context { return requests },
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Webhook server stopped")
		}
	}()
	stopped := make(chan struct{})
	context.AfterFunc(ctx, func() {
		defer close(stopped)
		ln.waitQuiet(acceptQuiet, acceptAfterStop)
		// Requests in flight finish: the API server's webhook timeout is
		// at most 30 s, 10 s by default.
		shutdownCtx, cancel := context.WithTimeout(requests, shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			logger.Info("Webhook requests still in flight at the end of the shutdown; closing them", "timeout", shutdownTimeout)
			_ = srv.Close()
		}
	})
	s.serving.Store(&servingState{addr: ln.Addr(), tls: served, stopped: stopped})
	logger.Info("Serving webhooks", "address", ln.Addr().String(), "paths", s.Paths(), "certificate", certs.Name())
	return ln.Addr(), nil
}

// acceptClock is a listener that knows when it last accepted a connection.
type acceptClock struct {
	net.Listener
	last atomic.Int64 // UnixNano; 0 before the first connection
}

func (l *acceptClock) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.last.Store(time.Now().UnixNano())
	}
	return c, err
}

// waitQuiet returns once no connection has been accepted for quiet, or
// after most.
func (l *acceptClock) waitQuiet(quiet, most time.Duration) {
	deadline := time.Now().Add(most)
	for {
		left := time.Until(deadline)
		since := time.Since(time.Unix(0, l.last.Load()))
		if since >= quiet || left <= 0 {
			return
		}
		time.Sleep(min(quiet-since, left))
	}
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
