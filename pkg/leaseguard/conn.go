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

package leaseguard

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// connection is the transport a Guard's clients share: TLS and credentials
// of the first config given to ClientConfig, over connections of its own.
type connection struct {
	once sync.Once
	rt   http.RoundTripper
	err  error
}

// ClientConfig returns a copy of cfg for a client that writes on the
// leader's behalf: its writes pass WrapTransport, and every request goes
// over connections of this Guard's own, which send no byte past the renew
// deadline while a write is in flight. A process paused between the
// transport's check and the write's first byte (mid-dial, or queued for a
// shared HTTP/2 connection) resumes with the write's context not yet
// cancelled, its timer not yet run; the connection checks the clock itself
// right before each send, and closes instead. What is left is the few
// instructions between that check and the system call.
//
// The connections (and their transport) are made once per Guard, from the
// first cfg given; later configs differ only in what is set per request
// (user agent, content type, rate limits), which is kept. If they cannot be
// made, the copy keeps cfg's own transport settings, and building a client
// from it reports why.
func (g *Guard) ClientConfig(cfg *rest.Config) *rest.Config {
	g.conn.once.Do(func() {
		base := rest.CopyConfig(cfg)
		base.UserAgent, base.Impersonate = "", rest.ImpersonationConfig{} // set per config, below
		base.WrapTransport = nil
		dial := base.Dial
		if dial == nil {
			// client-go's own dialer settings.
			dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		}
		base.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := dial(ctx, network, address)
			if err != nil {
				return nil, err
			}
			return &gatedConn{Conn: c, guard: g}, nil
		}
		g.conn.rt, g.conn.err = rest.TransportFor(base)
	})
	out := rest.CopyConfig(cfg)
	if g.conn.err == nil {
		// The transport carries TLS and credentials; a config with a
		// transport of its own may carry neither.
		out.Transport = g.conn.rt
		out.TLSClientConfig = rest.TLSClientConfig{}
		out.BearerToken, out.BearerTokenFile, out.Username, out.Password = "", "", "", ""
		out.AuthProvider, out.AuthConfigPersister, out.ExecProvider = nil, nil, nil
		out.Dial, out.Proxy = nil, nil
	}
	out.Wrap(g.WrapTransport)
	return out
}

// gatedConn is a connection of a Guard's clients.
type gatedConn struct {
	net.Conn
	guard *Guard
}

// Write sends p unless a write is in flight and the Lease is not fresh:
// then it closes the connection, so that the request's stream ends where
// it is and the client dials anew for the next. Bytes of reads sharing
// the connection are refused with it; their clients retry.
func (c *gatedConn) Write(p []byte) (int, error) {
	if c.guard.writing.Load() > 0 {
		if _, err := c.guard.remaining(); err != nil {
			refusedWrites.WithLabelValues(c.guard.name).Inc()
			_ = c.Conn.Close()
			return 0, fmt.Errorf("not sending: %w", err)
		}
	}
	return c.Conn.Write(p)
}
