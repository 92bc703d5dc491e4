package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// Launcher starts manager processes of one binary, all authenticating with
// one kubeconfig and writing their logs into one directory.
type Launcher struct {
	// Binary is the manager executable.
	Binary string
	// Kubeconfig is what the managers authenticate with: the
	// ServiceAccount's token, not the admin's.
	Kubeconfig string
	// LogDir receives <name>.log per process.
	LogDir string
	// ObserverToken is sent to the managers' protected endpoints.
	ObserverToken string

	spawner *controlplane.Spawner
	client  *http.Client
	mu      sync.Mutex
	names   map[string]int
	closed  bool
}

// NewLauncher returns a Launcher; Close it when every process has exited.
func NewLauncher(binary, kubeconfig, logDir, observerToken string) *Launcher {
	return &Launcher{
		Binary: binary, Kubeconfig: kubeconfig, LogDir: logDir, ObserverToken: observerToken,
		spawner: controlplane.NewSpawner(),
		client: &http.Client{
			Timeout: 5 * time.Second,
			// The managers serve a self-signed certificate.
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // test of a self-signed endpoint
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
const startTimeout = 30 * time.Second

// Process is one running (or exited) manager process.
type Process struct {
	// Name is unique per launcher and names the log file.
	Name string
	// ExtraArgs are the arguments given to Start, kept for Restart.
	ExtraArgs []string
	// Args are all its arguments.
	Args []string
	// URL is the base URL of its HTTPS server.
	URL string
	// LogPath is where its stdout and stderr go.
	LogPath string
	// Started is when it was started.
	Started time.Time

	l       *Launcher
	cmd     *exec.Cmd
	done    chan struct{}
	exited  time.Time
	waitErr error
}

// Start runs the manager with leader election on, its Lease in
// ManagerNamespace, HTTPS with delegated auth on a free loopback port, and
// extraArgs (which may override any of those), and waits until it serves
// /healthz.
func (l *Launcher) Start(ctx context.Context, name string, extraArgs ...string) (*Process, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		p, err := l.start(ctx, name, extraArgs)
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
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	address := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{
		"--kubeconfig=" + l.Kubeconfig,
		"--leader-elect=true",
		"--leader-elect-resource-namespace=" + ManagerNamespace,
		"--http-address=" + address,
		"--secure-serving=true",
		"--shutdown-timeout=30s",
		"-v=2",
	}, extraArgs...)

	l.mu.Lock()
	l.names[name]++
	if n := l.names[name]; n > 1 {
		name = fmt.Sprintf("%s-%d", name, n)
	}
	l.mu.Unlock()
	logPath := filepath.Join(l.LogDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}

	cmd := exec.Command(l.Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Signals to the test's process group (Ctrl-C) do not reach it; the
		// test decides when it stops.
		Setpgid: true,
		// Killed with the test binary, should that die without cleaning up.
		Pdeathsig: syscall.SIGKILL,
	}
	p := &Process{Name: name, ExtraArgs: extraArgs, Args: args, URL: "https://" + address, LogPath: logPath,
		l: l, cmd: cmd, done: make(chan struct{})}
	p.Started = time.Now()
	if err := l.spawner.Start(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		p.exited = time.Now()
		_ = logFile.Close()
		close(p.done)
	}()

	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("exited during startup (%v)", p.waitErr)
		}
		code, _, err := p.Get(ctx, "/healthz")
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		p.Stop(5 * time.Second)
		return p, fmt.Errorf("manager %s did not serve /healthz: %w; last output:\n%s", name, err, p.LogTail(20))
	}
	return p, nil
}

// Restart starts a new process with the same extra arguments, as a kubelet
// restarts a container, named after this one.
func (p *Process) Restart(ctx context.Context) (*Process, error) {
	return p.l.Start(ctx, p.Name, p.ExtraArgs...)
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitedAt is when the process was seen to exit (zero while it runs).
func (p *Process) ExitedAt() time.Time {
	if !p.Exited() {
		return time.Time{}
	}
	return p.exited
}

// ExitCode is the exit status once exited: -1 if a signal ended it, or while
// it still runs.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// ExitDescription says how the process ended, e.g. "exit status 1" or
// "signal: killed".
func (p *Process) ExitDescription() string {
	if !p.Exited() {
		return "running"
	}
	return p.cmd.ProcessState.String()
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("signalling %s: it has exited", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Wait waits until the process exits or timeout passes.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
}

// Stop sends SIGTERM, and SIGKILL if the process has not exited after grace,
// and waits for the exit. It is safe to call more than once.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if p.Wait(grace) != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Get fetches path from the process's HTTPS server with the observer token.
func (p *Process) Get(ctx context.Context, path string) (int, []byte, error) {
	return p.GetWithToken(ctx, path, p.l.ObserverToken)
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
type DebugStatus struct {
	Leading      bool `json:"leading"`
	CachesSynced bool `json:"cachesSynced"`
	Controllers  []struct {
		Name       string `json:"name"`
		Running    bool   `json:"running"`
		QueueDepth *int   `json:"queueDepth,omitempty"`
	} `json:"controllers"`
}

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

// LogTail returns the last n lines of the process's output.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.LogPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
