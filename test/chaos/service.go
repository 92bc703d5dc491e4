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

package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// The manifests' readiness probe of the manager: /readyz every second, 1 s
// timeout, unready after 3 failures in a row.
const (
	probePeriod           = time.Second
	probeTimeout          = time.Second
	probeFailureThreshold = 3
)

// webhookService stands in for the webhook Service and its endpoints as a
// cluster routes them: a new connection goes, round robin, to a process
// that serves its webhooks and is ready: it passed a probe since it last
// failed probeFailureThreshold in a row (within 3 s of SIGTERM, as the
// endpoints drop a pod whose readiness fails) and has not exited. Every
// change of the endpoints is logged, and so is a connection closed for
// want of one. Unlike test/e2e's balancer, a connection sent to an endpoint that
// refuses it is not tried elsewhere: kube-proxy does not retry either, so a
// replica that closes its webhook port while still routed to fails the API
// server's call, which is what the rollout fault must never see.
type webhookService struct {
	ln    net.Listener
	procs func() []*framework.Process

	mu       sync.Mutex
	serving  map[string]bool // added by the launcher, not exited
	ready    map[string]bool // routed to
	failures map[string]int  // failed probes in a row
	next     int
}

func newWebhookService(procs func() []*framework.Process) (*webhookService, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &webhookService{ln: ln, procs: procs, serving: map[string]bool{}, ready: map[string]bool{}, failures: map[string]int{}}
	go s.accept()
	return s, nil
}

// Addr is host:port of the stand-in Service.
func (s *webhookService) Addr() string { return s.ln.Addr().String() }

// Close stops accepting connections.
func (s *webhookService) Close() error { return s.ln.Close() }

// Add is the launcher's: the process at addr serves its webhooks. It is
// routed to once a probe passes, as a started pod becomes an endpoint once
// ready.
func (s *webhookService) Add(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serving[addr] = true
}

// Remove is the launcher's: the process at addr exited.
func (s *webhookService) Remove(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.serving, addr)
	delete(s.ready, addr)
}

// endpoints are the addresses routed to, sorted.
func (s *webhookService) endpoints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for addr := range s.serving {
		if s.ready[addr] {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return out
}

// probe runs the readiness probe of every running process every
// probePeriod until ctx ends.
func (s *webhookService) probe(ctx context.Context) {
	t := time.NewTicker(probePeriod)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, p := range s.procs() {
			if p == nil || p.WebhookAddr == "" || p.Exited() {
				continue
			}
			wg.Go(func() {
				pctx, cancel := context.WithTimeout(ctx, probeTimeout)
				defer cancel()
				code, _, err := p.Get(pctx, "/readyz")
				s.observe(ctx, p.Name, p.WebhookAddr, err == nil && code == http.StatusOK, fmt.Sprintf("code %d, %v", code, err))
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observe records a probe of the process name serving at addr.
func (s *webhookService) observe(ctx context.Context, name, addr string, ok bool, result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.serving[addr] {
		return
	}
	was := s.ready[addr]
	if ok {
		s.failures[addr] = 0
		s.ready[addr] = true
	} else if s.failures[addr]++; s.failures[addr] >= probeFailureThreshold {
		s.ready[addr] = false
	}
	if s.ready[addr] != was {
		klog.FromContext(ctx).Info("Webhook endpoint changed", "process", name, "ready", s.ready[addr], "probe", result)
	}
}

func (s *webhookService) accept() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.forward(conn)
	}
}

// forward passes conn to one endpoint; with none, or if that one refuses,
// conn is closed, as a Service without endpoints or a dead endpoint does.
func (s *webhookService) forward(conn net.Conn) {
	defer conn.Close()
	eps := s.endpoints()
	if len(eps) == 0 {
		klog.Info("Webhook Service has no ready endpoint: connection closed")
		return
	}
	s.mu.Lock()
	s.next++
	backend := eps[s.next%len(eps)]
	s.mu.Unlock()
	upstream, err := net.DialTimeout("tcp", backend, 2*time.Second)
	if err != nil {
		klog.InfoS("Webhook endpoint refused a connection: closed", "endpoint", backend, "err", err)
		return
	}
	defer upstream.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, upstream); done <- struct{}{} }()
	<-done
}
