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

// Package framework runs the controller manager in-process against the
// local control plane for integration tests, and counts what it writes.
package framework

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
)

// Manager is a controller manager running in this test process.
type Manager struct {
	*app.Manager
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what Run returned
	// Writes counts the manager's write requests.
	Writes *WriteCounter
	URL    string
}

// StartManager runs the manager against cfg (copied, with a write counter)
// until the test ends. By default leader election is off, the webhooks are
// off and the HTTP server listens on a free loopback port; mutate changes the
// options, extra adds manager options (e.g. test webhooks).
func StartManager(t testing.TB, cfg *rest.Config, mutate func(*options.Options), extra ...app.Option) *Manager {
	t.Helper()
	return StartManagerWith(t, cfg, app.NewRegistry(), mutate, extra...)
}

// StartManagerWith is StartManager with another registry of controllers
// and extra manager options, for tests of the manager itself.
func StartManagerWith(t testing.TB, cfg *rest.Config, registry app.Registry, mutate func(*options.Options), extra ...app.Option) *Manager {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	m, err := RunManager(ctx, cfg, registry, func(o *options.Options) {
		o.Generic.ShutdownTimeout = 10 * time.Second
		o.Generic.ShutdownDelay = 0 // the lame-duck tests set theirs
		if mutate != nil {
			mutate(o)
		}
	}, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	return m
}

// RunManager runs the manager in this process against cfg (copied, with a
// write counter) until ctx is done or Stop, with leader election and the
// webhooks off, plain HTTP on a free loopback port and the options mutate
// changes. The scale benchmark profiles the manager this way.
func RunManager(ctx context.Context, cfg *rest.Config, registry app.Registry, mutate func(*options.Options), extra ...app.Option) (*Manager, error) {
	opts := options.NewOptions()
	opts.LeaderElection.LeaderElect = false
	opts.Generic.HTTPAddress = "127.0.0.1:0"
	opts.Generic.SecureServing = false // the auth test turns it on
	opts.Webhook.Enabled = false       // the webhook tests turn it on, each on its own port
	// Domains, as an install that serves Ingresses has: without a host an
	// annotated Service or an App gets no Ingress at all.
	opts.Ingress.DefaultDomain = "ingress.test"
	opts.App.IngressDomain = "apps.test"
	if mutate != nil {
		mutate(opts)
	}
	counted, writes := CountWrites(cfg)

	ctx, cancel := context.WithCancel(ctx)
	m, err := app.NewManager(ctx, opts, registry, append([]app.Option{app.WithRESTConfig(counted)}, extra...)...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	scheme := "http://"
	if opts.Generic.SecureServing {
		scheme = "https://"
	}
	tm := &Manager{Manager: m, cancel: cancel, done: make(chan struct{}), Writes: writes,
		URL: scheme + m.HTTPAddr().String()}
	go func() {
		tm.err = m.Run(ctx)
		close(tm.done)
	}()
	return tm, nil
}

// Done is closed once Run has returned, on its own or after Stop.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Err is what Run returned; valid once Done is closed.
func (m *Manager) Err() error { return m.err }

// Stop cancels the manager as SIGTERM would and returns what Run returned.
func (m *Manager) Stop() error {
	m.cancel()
	select {
	case <-m.done:
		return m.err
	case <-time.After(time.Minute):
		return fmt.Errorf("manager did not stop within a minute")
	}
}

// Get fetches a path from the manager's HTTP server.
func (m *Manager) Get(path string) (int, string, error) {
	return m.GetWithToken(path, "")
}

// insecureClient talks to the manager's self-signed HTTPS endpoint.
var insecureClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // test of a self-signed endpoint
}

// GetWithToken fetches a path, sending token as a bearer token when not empty.
func (m *Manager) GetWithToken(path, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, m.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// QueuesEmpty reads /debug/controllers and reports whether every running
// controller's queue is empty.
func (m *Manager) QueuesEmpty() (bool, error) {
	status, body, err := m.Get("/debug/controllers")
	if err != nil || status != http.StatusOK {
		return false, fmt.Errorf("GET /debug/controllers: %d %v", status, err)
	}
	var debug app.DebugStatus
	if err := json.Unmarshal([]byte(body), &debug); err != nil {
		return false, err
	}
	return debug.QueuesEmpty(), nil
}

// WriteCounter counts requests that change something on the API server,
// and, apart, the reads that are not watches.
type WriteCounter struct {
	mu     sync.Mutex
	total  int
	byPath map[string]int
	reads  map[string]int
	// byClient counts the writes per client: the last part of the user
	// agent (controller-manager/<client>), then "METHOD /path".
	byClient map[string]map[string]int
	// conflicts counts the writes refused with 409 Conflict, by
	// "METHOD /path": they changed nothing, and their retry is a write too.
	conflicts map[string]int
}

// Conflicts returns the writes so far refused with 409 Conflict, keyed
// "METHOD /path" as ByRequest.
func (c *WriteCounter) Conflicts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.conflicts)
}

// ByClient returns the writes so far per client (the controller or shard
// unit its user agent names), each keyed "METHOD /path".
func (c *WriteCounter) ByClient() map[string]map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]int, len(c.byClient))
	for client, reqs := range c.byClient {
		out[client] = maps.Clone(reqs)
	}
	return out
}

// Reads returns the GETs so far that are not watches (lists and reads of
// one object) keyed by path.
func (c *WriteCounter) Reads() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.reads))
	for k, n := range c.reads {
		out[k] = n
	}
	return out
}

// Total is the number of writes so far.
func (c *WriteCounter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// ByRequest returns the writes so far keyed "METHOD /path".
func (c *WriteCounter) ByRequest() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.byPath))
	for k, n := range c.byPath {
		out[k] = n
	}
	return out
}

// Summary lists writes by method and path, for failure messages.
func (c *WriteCounter) Summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for k, n := range c.byPath {
		fmt.Fprintf(&b, "%d× %s\n", n, k)
	}
	return b.String()
}

// CountWrites returns a copy of cfg whose transport counts every POST, PUT,
// PATCH and DELETE, and every GET that is not a watch.
func CountWrites(cfg *rest.Config) (*rest.Config, *WriteCounter) {
	c := &WriteCounter{byPath: map[string]int{}, reads: map[string]int{}, byClient: map[string]map[string]int{}, conflicts: map[string]int{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				c.mu.Lock()
				c.total++
				c.byPath[req.Method+" "+req.URL.Path]++
				agent := req.UserAgent()
				client := agent[strings.LastIndex(agent, "/")+1:]
				if c.byClient[client] == nil {
					c.byClient[client] = map[string]int{}
				}
				c.byClient[client][req.Method+" "+req.URL.Path]++
				c.mu.Unlock()
			case http.MethodGet:
				if req.URL.Query().Get("watch") != "true" {
					c.mu.Lock()
					c.reads[req.URL.Path]++
					c.mu.Unlock()
				}
			}
			res, err := rt.RoundTrip(req)
			if err == nil && res.StatusCode == http.StatusConflict && req.Method != http.MethodGet {
				c.mu.Lock()
				c.conflicts[req.Method+" "+req.URL.Path]++
				c.mu.Unlock()
			}
			return res, err
		})
	})
	return out, c
}

// RoundTripFunc is a function as an http.RoundTripper, for the tests that
// wrap a client's transport to count or fail its requests.
type RoundTripFunc func(*http.Request) (*http.Response, error)

func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Eventually polls cond every 100ms until it returns true, failing the test
// with msg after timeout. cond's error is reported, not fatal, while polling.
func Eventually(t testing.TB, timeout time.Duration, msg string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true,
		func(ctx context.Context) (bool, error) {
			ok, err := cond(ctx)
			if err != nil {
				lastErr = err
				return false, nil
			}
			return ok, nil
		})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, msg, lastErr)
	}
}
