package webhook

import (
	"io"
	"net"
	"sync"
	"testing"
)

// balancer stands in for the webhook Service: it spreads new TCP
// connections over the live replicas, round robin, and passes TLS through
// untouched, so the API server verifies each replica's own certificate.
// With no replica it closes connections at once, as a Service without
// endpoints rejects them.
type balancer struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
}

func newBalancer(t *testing.T) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go b.accept()
	return b
}

// Addr is what the webhook configurations' URLs name.
func (b *balancer) Addr() string { return b.ln.Addr().String() }

// SetBackends replaces the replicas new connections go to.
func (b *balancer) SetBackends(addrs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append([]string(nil), addrs...)
}

func (b *balancer) pick() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.backends) == 0 {
		return ""
	}
	b.next = (b.next + 1) % len(b.backends)
	return b.backends[b.next]
}

func (b *balancer) accept() {
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(conn)
	}
}

func (b *balancer) forward(conn net.Conn) {
	defer conn.Close()
	backend := b.pick()
	if backend == "" {
		return
	}
	upstream, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}
