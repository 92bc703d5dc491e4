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
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestGuard() (*Guard, *fakeClock) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	g := New("test", 10*time.Second)
	g.now = clock.now
	return g, clock
}

// fakeLock answers every write with err and every read with holder.
type fakeLock struct {
	resourcelock.Interface
	err     error
	holder  string
	updates []resourcelock.LeaderElectionRecord
}

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: l.holder}, nil, nil
}

func (l *fakeLock) Identity() string { return "me" }
func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.err
}
func (l *fakeLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.updates = append(l.updates, ler)
	return l.err
}
func (l *fakeLock) Describe() string { return "test/lease" }

func TestGuardFollowsRenewals(t *testing.T) {
	ctx := context.Background()
	g, clock := newTestGuard()
	inner := &fakeLock{}
	lock := g.Lock(inner)

	if err := g.check(); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("before any acquire: Check = %v, want ErrLeaseNotHeld", err)
	}
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := g.check(); err != nil {
		t.Fatalf("just acquired: Check = %v", err)
	}

	// A paused process resumes past the renew deadline with no renewal in
	// between: it must not write, whatever the election loop thinks yet.
	clock.t = clock.t.Add(10*time.Second + time.Millisecond)
	if err := g.check(); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("renewal older than the renew deadline: Check = %v, want ErrLeaseNotHeld", err)
	}

	// A failed renewal changes nothing; a successful one restores.
	inner.err = errors.New("apiserver unavailable")
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if g.check() == nil {
		t.Fatal("a failed renewal counted as a renewal")
	}
	inner.err = nil
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if err := g.check(); err != nil {
		t.Fatalf("after a renewal: Check = %v", err)
	}

	// A release (empty holder) ends the hold at once.
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""})
	if g.check() == nil {
		t.Fatal("still allowed to write after releasing the Lease")
	}
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	g.Lost()
	if g.check() == nil {
		t.Fatal("still allowed to write after Lost")
	}
}

// The renewal counts from when its request was sent, not from when the
// answer came: a slow answer must not extend the hold.
func TestGuardCountsFromTheRequest(t *testing.T) {
	g, clock := newTestGuard()
	slow := &slowLock{clock: clock, took: 8 * time.Second}
	if err := g.Lock(slow).Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(3 * time.Second) // 11 s after the request was sent
	if g.check() == nil {
		t.Fatal("the hold was counted from the answer, not from the request")
	}
}

type slowLock struct {
	fakeLock
	clock *fakeClock
	took  time.Duration
}

func (l *slowLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.clock.t = l.clock.t.Add(l.took)
	return nil
}

func TestTransportRefusesOnlyWrites(t *testing.T) {
	g, clock := newTestGuard()
	var served []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.Method)
	}))
	defer srv.Close()
	client := &http.Client{Transport: g.WrapTransport(http.DefaultTransport)}

	g.Renewed(clock.t)
	clock.t = clock.t.Add(time.Minute)
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/namespaces/x/configmaps", strings.NewReader("{}"))
		resp, err := client.Do(req)
		if method == http.MethodGet {
			if err != nil {
				t.Errorf("GET refused: %v", err)
			} else {
				resp.Body.Close()
			}
			continue
		}
		if !errors.Is(err, ErrLeaseNotHeld) {
			t.Errorf("%s with a stale Lease: err = %v, want ErrLeaseNotHeld", method, err)
		}
	}
	if len(served) != 1 || served[0] != http.MethodGet {
		t.Errorf("the server saw %v, want only the GET", served)
	}

	g.Renewed(clock.t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST with a fresh Lease: %v", err)
	}
	resp.Body.Close()
}

// A Lease read that names another holder (stolen by hand, or taken after a
// stall) ends the hold at once, not at the renew deadline.
func TestGuardLetsGoWhenAnotherHolderIsRead(t *testing.T) {
	ctx := context.Background()
	g, _ := newTestGuard()
	inner := &fakeLock{holder: "me"}
	lock := g.Lock(inner)
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	if _, _, err := lock.Get(ctx); err != nil || g.check() != nil {
		t.Fatalf("reading our own hold: err %v, Check %v", err, g.check())
	}
	inner.holder = "thief"
	_, _, _ = lock.Get(ctx)
	if err := g.check(); !errors.Is(err, ErrLeaseNotHeld) {
		t.Fatalf("after reading a Lease held by another: Check = %v, want ErrLeaseNotHeld", err)
	}
}

// A leader that lost the Lease does not release it over the new holder:
// client-go's release reads the Lease, then decides from the record it had
// observed before, in which it still leads.
func TestLockDoesNotReleaseAnothersLease(t *testing.T) {
	ctx := context.Background()
	g, _ := newTestGuard()
	inner := &fakeLock{}
	lock := g.Lock(inner)
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	inner.holder = "thief"
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	inner.updates = nil
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "", LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if len(inner.updates) != 0 {
		t.Fatalf("released a Lease held by someone else: %+v", inner.updates)
	}

	// Our own Lease is still released.
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	inner.holder = "me"
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	inner.updates = nil
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""}); err != nil {
		t.Fatal(err)
	}
	if len(inner.updates) != 1 {
		t.Fatalf("our own Lease was not released: %+v", inner.updates)
	}
}

// slowTransport stands for a connection to an API server that is
// restarting: a request waits delay (dialling, TLS) before it reaches the
// server, unless its context ends first.
type slowTransport struct {
	delay     time.Duration
	delivered chan time.Time
}

func (s *slowTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-time.After(s.delay):
		s.delivered <- time.Now()
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// A write the guard lets through must not reach the API server after the
// renew deadline either: one checked just in time and then held up on its
// way (an API server restarting, the process paused mid-dial) would land
// when a standby may lead. The chaos suite saw a status update received
// 7.1 s after the last renewal (lease 6 s, renew deadline 4 s), sent while
// kube-apiserver restarted.
func TestTransportWriteCannotLandAfterTheRenewDeadline(t *testing.T) {
	g := New("test", 200*time.Millisecond)
	next := &slowTransport{delay: time.Second, delivered: make(chan time.Time, 1)}
	rt := g.WrapTransport(next)
	renewed := time.Now()
	g.Renewed(renewed)

	req, err := http.NewRequest(http.MethodPut, "https://apiserver/apis/x/v1/things/a", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	select {
	case at := <-next.delivered:
		t.Fatalf("the write reached the server %v after the renewal, past the %v renew deadline (err %v)",
			at.Sub(renewed).Round(time.Millisecond), 200*time.Millisecond, err)
	default:
	}
	if !errors.Is(err, ErrLeaseNotHeld) {
		t.Errorf("RoundTrip error = %v, want one wrapping ErrLeaseNotHeld", err)
	}

	// A write that completes in time is not affected, and its body stays
	// readable until closed.
	g.Renewed(time.Now())
	fast := &slowTransport{delay: 0, delivered: make(chan time.Time, 1)}
	req, _ = http.NewRequest(http.MethodPut, "https://apiserver/apis/x/v1/things/a", strings.NewReader("{}"))
	resp, err = g.WrapTransport(fast).RoundTrip(req)
	if err != nil {
		t.Fatalf("a write within the deadline: %v", err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Errorf("reading the body: %v", err)
	}
	resp.Body.Close()
}

// lockedClock is a fakeClock that a dial on the transport's goroutines
// may move.
type lockedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *lockedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *lockedClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A write the transport let through must not reach the API server once
// the renew deadline has passed on its way, even before anything has run
// its context's timer. The chaos suite saw a status update received 16 ms
// after SIGCONT of a leader paused for 9 s (lease 6 s, renew deadline
// 4 s): a process resuming runs its goroutines in any order, the request's
// writer before the timer. Here the pause is the dial's.
func TestConnectionSendsNothingPastTheRenewDeadline(t *testing.T) {
	var received atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { received.Add(1) }))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	clock := &lockedClock{t: time.Unix(1000, 0)}
	g := New("test", 10*time.Second)
	g.now = clock.now
	var stall atomic.Int64 // how long the next dial takes, on the Guard's clock
	cfg := &rest.Config{
		Host:            srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			clock.add(time.Duration(stall.Swap(0)))
			return (&net.Dialer{}).DialContext(ctx, network, address)
		},
	}
	client, err := rest.HTTPClientFor(g.ClientConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	send := func(method string) error {
		req, err := http.NewRequest(method, srv.URL+"/apis/x/v1/things/a", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}

	g.Renewed(clock.now())
	stall.Store(int64(11 * time.Second))
	err = send(http.MethodPut)
	if n := received.Load(); n != 0 {
		t.Fatalf("the write reached the server past the renew deadline (%d requests; err %v)", n, err)
	}
	if err == nil {
		t.Fatal("a write past the renew deadline succeeded")
	}

	// Renewed, the next write dials anew and goes through.
	g.Renewed(clock.now())
	if err := send(http.MethodPut); err != nil {
		t.Fatalf("a write within the renew deadline: %v", err)
	}
	// With no write in flight, reads pass without a Lease.
	g.Lost()
	if err := send(http.MethodGet); err != nil {
		t.Fatalf("a read without the Lease: %v", err)
	}
	if n := received.Load(); n != 2 {
		t.Fatalf("the server received %d requests, want 2", n)
	}
}

// The Guard's transport is made from the first config; the clients of
// later configs keep what they set per request (user agent, impersonation),
// and every request carries the credentials once.
func TestClientConfigKeepsWhatEachConfigSets(t *testing.T) {
	type seen struct{ agent, auth, impersonate []string }
	got := make(chan seen, 2)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- seen{r.Header.Values("User-Agent"), r.Header.Values("Authorization"), r.Header.Values("Impersonate-User")}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	g := New("test", 10*time.Second)
	g.Renewed(time.Now())
	base := &rest.Config{Host: srv.URL, BearerToken: "t0k3n",
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	for _, tc := range []struct{ agent, user string }{{"controller-manager/app", ""}, {"controller-manager/ingress", "alice"}} {
		cfg := rest.CopyConfig(base)
		cfg.UserAgent, cfg.Impersonate.UserName = tc.agent, tc.user
		client, err := rest.HTTPClientFor(g.ClientConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/x", strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := <-got
		var wantUser []string
		if tc.user != "" {
			wantUser = []string{tc.user}
		}
		if !slices.Equal(s.agent, []string{tc.agent}) || !slices.Equal(s.auth, []string{"Bearer t0k3n"}) || !slices.Equal(s.impersonate, wantUser) {
			t.Errorf("config %+v: the server saw user agent %q, authorization %q, impersonation %q", tc, s.agent, s.auth, s.impersonate)
		}
	}
}
