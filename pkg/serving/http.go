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

package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// ServeHTTP listens on address and serves handler until ctx is done, over
// TLS when tlsConfig is set. The listener is opened before it returns, so a
// bad address fails startup. The channel is closed once the server has shut
// down.
func ServeHTTP(ctx context.Context, address string, handler http.Handler, tlsConfig *tls.Config) (net.Addr, <-chan struct{}, error) {
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
