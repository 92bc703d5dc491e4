package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	_ "k8s.io/component-base/metrics/prometheus/clientgo" // rest_client_*, workqueue_*, leader_election_* metrics
)

// healthChecker is one named check; client-go's leader-election
// HealthzAdaptor is one.
type healthChecker interface {
	Name() string
	Check(req *http.Request) error
}

type checkFunc struct {
	name  string
	check func(*http.Request) error
}

func (c checkFunc) Name() string                  { return c.name }
func (c checkFunc) Check(req *http.Request) error { return c.check(req) }

var ping = checkFunc{name: "ping", check: func(*http.Request) error { return nil }}

// newHTTPHandler serves probes, metrics and the debug page.
func newHTTPHandler(status *managerStatus, health []healthChecker) http.Handler {
	ready := append([]healthChecker{}, health...)
	ready = append(ready, checkFunc{name: "informer-sync", check: func(*http.Request) error {
		if !status.synced() {
			return errors.New("informer caches have not synced yet")
		}
		return nil
	}})

	mux := http.NewServeMux()
	mux.Handle("/healthz", checksHandler(health))
	mux.Handle("/livez", checksHandler(health))
	mux.Handle("/readyz", checksHandler(ready))
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/debug/controllers", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(status.debug())
	})
	return mux
}

// checksHandler answers 200 "ok" when every check passes and 500 with the
// failing checks otherwise; ?verbose lists every check.
func checksHandler(checks []healthChecker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var report strings.Builder
		failed := false
		for _, c := range checks {
			if err := c.Check(req); err != nil {
				failed = true
				fmt.Fprintf(&report, "[-]%s failed: %v\n", c.Name(), err)
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", c.Name())
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, report.String(), "check failed\n")
			return
		}
		if _, verbose := req.URL.Query()["verbose"]; verbose {
			fmt.Fprint(w, report.String())
		}
		fmt.Fprint(w, "ok\n")
	})
}

// serveHTTP listens on address and serves handler until ctx is done, over
// TLS when tlsConfig is set. The listener is opened before it returns, so a
// bad address fails startup.
func serveHTTP(ctx context.Context, address string, handler http.Handler, tlsConfig *tls.Config) (net.Addr, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening on --http-address %s: %w", address, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	logger := klog.FromContext(ctx)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "HTTP server stopped")
		}
	}()
	context.AfterFunc(ctx, func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	})
	logger.Info("Serving probes and metrics", "address", ln.Addr().String(), "tls", tlsConfig != nil)
	return ln.Addr(), nil
}
