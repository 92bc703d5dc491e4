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

package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	_ "k8s.io/component-base/metrics/prometheus/clientgo" // rest_client_*, workqueue_*, leader_election_* metrics
)

// newHTTPHandler serves probes, metrics and the debug page. /healthz and
// /livez run the live checks (ping, and the leader election watchdog when
// it is on). /readyz, which the kubelet probes and the webhook Service
// routes by, runs only ping and readiness: the webhook certificate and the
// lame duck's shutting-down. The controllers' cache sync has its own
// check, /readyz/informer-sync, kept out of /readyz: a cold standby or one
// controller's missing RBAC must not take admission and conversion down.
// Every check is also served on its own path and ?verbose lists them.
// profiling adds Go's profiles under /debug/pprof/.
func newHTTPHandler(status *managerStatus, live, readiness []healthz.HealthChecker, profiling bool) http.Handler {
	synced := healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if !status.synced() {
			return errors.New("informer caches have not synced yet")
		}
		return nil
	})

	mux := http.NewServeMux()
	healthz.InstallHandler(mux, live...)
	healthz.InstallLivezHandler(mux, live...)
	healthz.InstallReadyzHandler(mux, append([]healthz.HealthChecker{healthz.PingHealthz}, readiness...)...)
	healthz.InstallPathHandler(mux, informerSyncPath, synced)
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/debug/controllers", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(status.debug())
	})
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// informerSyncPath reports whether the controllers' informers have synced;
// it is not part of /readyz.
const informerSyncPath = "/readyz/informer-sync"

// serveHTTP listens on address and serves handler until ctx is done, over
// TLS when tlsConfig is set. The listener is opened before it returns, so a
// bad address fails startup. The channel is closed once the server has shut
// down.
func serveHTTP(ctx context.Context, address string, handler http.Handler, tlsConfig *tls.Config) (net.Addr, <-chan struct{}, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on --http-address %s: %w", address, err)
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
	stopped := make(chan struct{})
	context.AfterFunc(ctx, func() {
		defer close(stopped)
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	})
	logger.Info("Serving probes and metrics", "address", ln.Addr().String(), "tls", tlsConfig != nil)
	return ln.Addr(), stopped, nil
}
