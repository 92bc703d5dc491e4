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

// Package tcpbalancer stands in for a Service in tests that run the manager
// as local processes: it spreads new TCP connections over live backends,
// round robin, and passes the bytes through untouched, so TLS ends at the
// backend and the client verifies each backend's own certificate.
package tcpbalancer

import (
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// Balancer listens on a loopback port and forwards each connection to one
// backend. A backend that refuses the connection is skipped, as kube-proxy
// skips an endpoint that is gone; with no backend left the connection is
// closed at once, as a Service without endpoints rejects it.
type Balancer struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
}

// New listens on 127.0.0.1 on a free port; Close stops it.
func New() (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln}
	go b.accept()
	return b, nil
}

// Addr is host:port to connect to.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Close stops accepting connections.
func (b *Balancer) Close() error { return b.ln.Close() }

// Set replaces the backends.
func (b *Balancer) Set(addrs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = slices.Clone(addrs)
}

// Add adds a backend.
func (b *Balancer) Add(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append(b.backends, addr)
}

// Remove removes a backend.
func (b *Balancer) Remove(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = slices.DeleteFunc(b.backends, func(s string) bool { return s == addr })
}

// candidates returns the backends in the order to try them for the next
// connection.
func (b *Balancer) candidates() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.backends)
	if n == 0 {
		return nil
	}
	b.next = (b.next + 1) % n
	return append(slices.Clone(b.backends[b.next:]), b.backends[:b.next]...)
}

func (b *Balancer) accept() {
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(conn)
	}
}

func (b *Balancer) forward(conn net.Conn) {
	defer conn.Close()
	var upstream net.Conn
	for _, backend := range b.candidates() {
		c, err := net.DialTimeout("tcp", backend, 2*time.Second)
		if err == nil {
			upstream = c
			break
		}
	}
	if upstream == nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}
