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

package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// Launcher starts manager processes of one binary, all authenticating with
// one kubeconfig and writing their logs into one directory. The e2e suite
// and the scale benchmark (test/bench/scale) run the binary through it.
type Launcher struct {
	// Binary is the manager executable.
	Binary string
	// Kubeconfig is what the managers authenticate with.
	Kubeconfig string
	// LogDir receives <name>.log per process.
	LogDir string
	// Args are given to every process before Start's own, which may
	// override them. The launcher adds --kubeconfig, --http-address,
	// --secure-serving and the webhook flags.
	Args []string
	// PlainHTTP serves plain HTTP without auth (--secure-serving=false);
	// by default the managers serve HTTPS with delegated auth.
	PlainHTTP bool
	// Token is sent to the managers' protected endpoints.
	Token string
	// Webhooks, when set, stands in for the webhook Service: every process
	// serves the webhooks on a port of its own and is its backend while it
	// runs. Nil runs the processes with --webhooks=false.
	Webhooks WebhookBackends

	spawner *controlplane.Spawner
	client  *http.Client
	mu      sync.Mutex
	names   map[string]int
	closed  bool
}

// WebhookBackends is what stands in for the webhook Service: the launcher
// adds each process's webhook address once it serves, and removes it when the
// process exits. A tcpbalancer.Balancer is one.
type WebhookBackends interface {
	Add(addr string)
	Remove(addr string)
}

// SuiteArgs are the e2e suite's manager flags: leader election on with the
// Lease in ManagerNamespace, the default shutdown timeout, verbose logs,
// and domains giving the Ingresses hosts (hack/kind/e2e.sh's DOMAIN_ARGS).
var SuiteArgs = []string{
	"--leader-elect=true",
	"--leader-elect-resource-namespace=" + ManagerNamespace,
	"--shutdown-timeout=30s",
	"-v=2",
	"--app-ingress-domain=apps.e2e.test",
	"--ingress-default-domain=ingress.e2e.test",
}

// NewLauncher returns a Launcher with no Args, serving HTTPS; set its
// fields before the first Start. Close it when every process has exited.
func NewLauncher(binary, kubeconfig, logDir string) *Launcher {
	return &Launcher{
		Binary: binary, Kubeconfig: kubeconfig, LogDir: logDir,
		spawner: controlplane.NewSpawner(),
		client: &http.Client{
			Timeout: 10 * time.Second,
			Transport: &http.Transport{
				// The managers serve a self-signed certificate.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test of a self-signed endpoint
				// Gzipping every scrape would cost the manager CPU that the
				// benchmark counts.
				DisableCompression: true,
			},
		},
		names: map[string]int{},
	}
}

// Close releases the launcher's spawning thread.
func (l *Launcher) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.spawner.Close()
	}
}

// startTimeout bounds how long a process may take to serve /healthz.
const startTimeout = time.Minute

// Process is one running (or exited) manager process.
type Process struct {
	*controlplane.Process
	// ExtraArgs are the arguments given to Start, kept for Restart.
	ExtraArgs []string
	// Args are all its arguments.
	Args []string
	// URL is the base URL of its HTTP(S) server.
	URL string
	// LogPath is where its stdout and stderr go.
	LogPath string
	// Started is when it was started.
	Started time.Time
	// WebhookAddr is where it serves the webhooks; empty without them.
	WebhookAddr string

	l         *Launcher
	startName string // the name given to Start
}

// Start runs the manager with the launcher's Args and extraArgs on a free
// loopback port and waits until it serves /healthz. Processes started under
// one name more than once are named name-2, name-3...
func (l *Launcher) Start(ctx context.Context, startName string, extraArgs ...string) (*Process, error) {
	l.mu.Lock()
	l.names[startName]++
	name := startName
	if n := l.names[startName]; n > 1 {
		name = fmt.Sprintf("%s-%d", startName, n)
	}
	l.mu.Unlock()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		p, err := l.start(ctx, name, extraArgs)
		if p != nil {
			p.startName = startName
		}
		if err == nil {
			return p, nil
		}
		// Another process may take the port between picking and binding.
		if p == nil || !p.Exited() || !strings.Contains(p.LogTail(20), "address already in use") || attempt == attempts {
			return nil, err
		}
	}
}

func (l *Launcher) start(ctx context.Context, name string, extraArgs []string) (*Process, error) {
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return nil, err
	}
	address := fmt.Sprintf("127.0.0.1:%d", ports[0])
	scheme := "https://"
	if l.PlainHTTP {
		scheme = "http://"
	}
	webhookArgs, webhookAddr := []string{"--webhooks=false"}, ""
	if l.Webhooks != nil {
		webhookPorts, err := controlplane.FreePorts(1)
		if err != nil {
			return nil, err
		}
		webhookAddr = fmt.Sprintf("127.0.0.1:%d", webhookPorts[0])
		// The certificate Secret in the manager's namespace, as in the
		// cluster, with 127.0.0.1 (what the balancer's URL names) added.
		webhookArgs = []string{"--webhook-address=127.0.0.1", fmt.Sprintf("--webhook-port=%d", webhookPorts[0]),
			"--webhook-namespace=" + ManagerNamespace, "--webhook-cert-extra-names=127.0.0.1"}
	}
	args := append([]string{
		"--kubeconfig=" + l.Kubeconfig,
		"--http-address=" + address,
		fmt.Sprintf("--secure-serving=%t", !l.PlainHTTP),
	}, webhookArgs...)
	args = append(append(args, l.Args...), extraArgs...)

	logPath := filepath.Join(l.LogDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cp, err := l.spawner.StartProcess(controlplane.Command{Name: name, Path: l.Binary, Args: args, Log: logFile})
	if err != nil {
		return nil, err
	}
	p := &Process{Process: cp, ExtraArgs: extraArgs, Args: args, URL: scheme + address, LogPath: logPath,
		Started: time.Now(), WebhookAddr: webhookAddr, l: l}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("exited during startup (%s)", p.ExitDescription())
		}
		code, _, err := p.Get(ctx, "/healthz")
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		_ = p.Stop(5 * time.Second)
		return p, fmt.Errorf("manager %s did not serve /healthz: %w; last output:\n%s", name, err, p.LogTail(20))
	}
	if p.WebhookAddr != "" {
		if err := p.waitServingWebhooks(ctx); err != nil {
			_ = p.Stop(5 * time.Second)
			return p, fmt.Errorf("manager %s did not serve its webhooks: %w; last output:\n%s", name, err, p.LogTail(20))
		}
		// A backend while it runs, as a ready pod is an endpoint.
		l.Webhooks.Add(p.WebhookAddr)
		go func() {
			<-p.Done()
			l.Webhooks.Remove(p.WebhookAddr)
		}()
	}
	return p, nil
}

// waitServingWebhooks waits until the webhook port completes a TLS
// handshake: the serving certificate is loaded. Who signed it is the API
// server's business (the caBundle).
func (p *Process) waitServingWebhooks(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("exited during startup (%s)", p.ExitDescription())
		}
		dialer := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // only whether a certificate is served
		conn, err := dialer.DialContext(ctx, "tcp", p.WebhookAddr)
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	})
}

// Restart starts a new process with the same extra arguments, as a kubelet
// restarts a container, named after this one.
func (p *Process) Restart(ctx context.Context) (*Process, error) {
	return p.l.Start(ctx, p.startName, p.ExtraArgs...)
}

// Get fetches path from the process's server with the launcher's Token.
func (p *Process) Get(ctx context.Context, path string) (int, []byte, error) {
	return p.GetWithToken(ctx, path, p.l.Token)
}

// GetWithToken fetches path with token as the bearer token; none when empty.
func (p *Process) GetWithToken(ctx context.Context, path, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := p.l.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// DebugStatus is the manager's /debug/controllers.
type DebugStatus = app.DebugStatus

// Debug returns the process's /debug/controllers.
func (p *Process) Debug(ctx context.Context) (DebugStatus, error) {
	var s DebugStatus
	code, body, err := p.Get(ctx, "/debug/controllers")
	if err != nil {
		return s, err
	}
	if code != http.StatusOK {
		return s, fmt.Errorf("GET /debug/controllers of %s: %d: %s", p.Name, code, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("decoding /debug/controllers of %s: %w", p.Name, err)
	}
	return s, nil
}

// Leading reports whether the process leads, per /debug/controllers.
func (p *Process) Leading(ctx context.Context) (bool, error) {
	s, err := p.Debug(ctx)
	return s.Leading, err
}

// LogContains reports whether the process's output so far contains s.
func (p *Process) LogContains(s string) bool {
	data, err := os.ReadFile(p.LogPath)
	return err == nil && bytes.Contains(data, []byte(s))
}

// WaitForLeader polls until exactly one of procs leads, and returns it and
// when it was first seen leading. Two leading at once is an error.
func WaitForLeader(ctx context.Context, timeout time.Duration, procs ...*Process) (*Process, time.Time, error) {
	var leader *Process
	var seen time.Time
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var leaders []string
		leader, last = nil, nil
		for _, p := range procs {
			if p.Exited() {
				continue
			}
			ok, err := p.Leading(ctx)
			if err != nil {
				last = err
				continue
			}
			if ok {
				leaders = append(leaders, p.Name)
				leader = p
			}
		}
		if len(leaders) > 1 {
			return false, fmt.Errorf("%d managers lead at once: %v", len(leaders), leaders)
		}
		seen = time.Now()
		return leader != nil, nil
	})
	if err != nil {
		if !wait.Interrupted(err) {
			return nil, time.Time{}, err
		}
		return nil, time.Time{}, fmt.Errorf("waiting for one of %d managers to lead: %w (last error: %v)", len(procs), err, last)
	}
	return leader, seen, nil
}
