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
	"bufio"
	"context"
	"net"
	"testing"
)

// TestWebhookServiceRoutesToReadyEndpointsOnly: the stand-in routes only to
// processes that serve and passed their probe, and, as kube-proxy, does not
// hide an endpoint whose port closed while it is still routed to: the
// connection fails. test/e2e's balancer skips it, which is why no test could
// see a replica closing its webhook port at SIGTERM (issue 22).
func TestWebhookServiceRoutesToReadyEndpointsOnly(t *testing.T) {
	s, err := newWebhookService(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dial := func() (string, error) {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			return "", err
		}
		defer c.Close()
		return bufio.NewReader(c).ReadString('\n')
	}
	live := echoServer(t, "live")
	s.Add(live)
	if got, err := dial(); err == nil {
		t.Errorf("a serving process that passed no probe got a connection: %q", got)
	}
	s.mu.Lock()
	s.ready[live] = true
	s.mu.Unlock()
	if got, err := dial(); err != nil || got != "live\n" {
		t.Errorf("the ready endpoint: %q, %v", got, err)
	}
	// A port closed while routed to (a replica without a lame duck).
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	s.Add(deadAddr)
	s.mu.Lock()
	s.ready[deadAddr] = true
	s.mu.Unlock()
	failed := 0
	for range 4 {
		if _, err := dial(); err != nil {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("%d of 4 connections failed with a closed port among 2 endpoints, want 2 (round robin, no retry elsewhere)", failed)
	}
	s.Remove(deadAddr)
	if got, err := dial(); err != nil || got != "live\n" {
		t.Errorf("after the closed port left the endpoints: %q, %v", got, err)
	}
}

// echoServer serves its name, one line, to every connection.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// An endpoint leaves after probeFailureThreshold failed probes in a row, as
// the manifests' readiness probe says, and comes back on the next pass.
func TestWebhookServiceDropsAnEndpointAfterThreeFailedProbes(t *testing.T) {
	s := &webhookService{serving: map[string]bool{"a": true}, ready: map[string]bool{}, failures: map[string]int{}}
	ctx := context.Background()
	s.observe(ctx, "a", "a", true, "ok")
	for i := 1; i < probeFailureThreshold; i++ {
		s.observe(ctx, "a", "a", false, "timeout")
		if len(s.endpoints()) != 1 {
			t.Fatalf("dropped after %d failed probes, want %d", i, probeFailureThreshold)
		}
	}
	s.observe(ctx, "a", "a", false, "timeout")
	if len(s.endpoints()) != 0 {
		t.Fatalf("still routed to after %d failed probes", probeFailureThreshold)
	}
	s.observe(ctx, "a", "a", true, "ok")
	if len(s.endpoints()) != 1 {
		t.Fatalf("not routed to after a passed probe")
	}
	s.observe(ctx, "b", "b", true, "ok") // not serving (exited): never routed to
	if len(s.endpoints()) != 1 {
		t.Fatalf("an exited process was routed to")
	}
}
