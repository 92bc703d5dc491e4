package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// manager is one controller manager under test: the real binary in its own
// process, or (for CPU profiles only) the same code in this process.
type manager interface {
	Name() string
	// Base is the URL of its HTTP server.
	Base() string
	// PID is its process; this process for an in-process manager.
	PID() int
	// Counters reads its writes, reconciles, CPU and memory.
	Counters(ctx context.Context) (managerCounters, error)
	// Terminate asks it to stop (SIGTERM) and waits at most grace for it to
	// exit; it returns the exit code.
	Terminate(grace time.Duration) (int, error)
	// Kill ends it at once (SIGKILL).
	Kill()
	// Exited reports whether it has stopped, and how.
	Exited() (bool, error)
	// LogTail is the end of its log, for error messages.
	LogTail() string
}

// spawner starts child processes from one OS thread that stays alive while
// the benchmark runs: Pdeathsig fires when the forking *thread* exits, so
// forking from arbitrary goroutines could kill children early.
type spawner struct {
	requests chan func()

	mu    sync.Mutex
	procs []*process
}

func newSpawner() *spawner {
	s := &spawner{requests: make(chan func())}
	go func() {
		// Never unlocked: the thread exits with this goroutine after close.
		runtime.LockOSThread()
		for f := range s.requests {
			f()
		}
	}()
	return s
}

// process is a child started by the spawner, in its own process group.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	done    chan struct{}
	waitErr error
}

func (s *spawner) start(name, path string, args []string, logPath string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // killed with its whole group
		Pdeathsig: syscall.SIGKILL, // and if this benchmark dies
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, log: log, done: make(chan struct{})}
	errc := make(chan error, 1)
	s.requests <- func() { errc <- cmd.Start() }
	if err := <-errc; err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

// stopAll kills every process still running, then ends the spawner's thread.
func (s *spawner) stopAll() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		if _, err := p.terminate(5 * time.Second); err != nil {
			klog.ErrorS(err, "Stopping a process", "process", p.name)
		}
	}
	close(s.requests)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate sends SIGTERM to the group, SIGKILL after grace, and waits.
func (p *process) terminate(grace time.Duration) (int, error) {
	if !p.exited() {
		_ = signalGroup(p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			return -1, fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, grace)
		}
	}
	_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL) // anything it forked
	return p.cmd.ProcessState.ExitCode(), nil
}

func (p *process) kill() {
	_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func (p *process) tail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// binaryManager is the controller-manager binary in a process of its own.
type binaryManager struct {
	name string
	proc *process
	base string
}

// managerSpec says how to run a binary manager.
type managerSpec struct {
	name       string
	binary     string
	kubeconfig string
	logDir     string
	// args come after the ones every benchmark manager gets.
	args []string
}

// commonManagerArgs are the flags of every manager the benchmark runs:
// client-side rate limiting off, plain HTTP on loopback, default workers.
func commonManagerArgs(kubeconfig, httpAddress string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--kube-api-qps=-1",
		"--secure-serving=false",
		"--http-address=" + httpAddress,
		"--app-ingress-domain=" + ingressDomain,
	}
}

// startBinaryManager runs the binary on a free loopback port and waits until
// its HTTP server answers. A port taken between picking and binding is
// retried with another.
func startBinaryManager(ctx context.Context, sp *spawner, spec managerSpec) (*binaryManager, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		args := append(commonManagerArgs(spec.kubeconfig, addr), spec.args...)
		logPath := filepath.Join(spec.logDir, "manager-"+spec.name+".log")
		klog.FromContext(ctx).Info("Starting manager", "name", spec.name, "args", strings.Join(args, " "), "log", logPath)
		p, err := sp.start("controller-manager "+spec.name, spec.binary, args, logPath)
		if err != nil {
			return nil, err
		}
		m := &binaryManager{name: spec.name, proc: p, base: "http://" + addr}
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if p.exited() {
				return false, fmt.Errorf("manager %s exited (%v); log:\n%s", spec.name, p.waitErr, p.tail(20))
			}
			status, _, err := httpGet(ctx, m.base+"/healthz")
			return err == nil && status == http.StatusOK, nil
		})
		if err == nil {
			return m, nil
		}
		taken := strings.Contains(p.tail(20), "address already in use")
		_, _ = p.terminate(5 * time.Second)
		if !taken || attempt == attempts {
			return nil, err
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (m *binaryManager) Name() string { return m.name }
func (m *binaryManager) Base() string { return m.base }
func (m *binaryManager) PID() int     { return m.proc.cmd.Process.Pid }

func (m *binaryManager) Counters(ctx context.Context) (managerCounters, error) {
	ms, err := scrape(ctx, m.base)
	if err != nil {
		return managerCounters{}, err
	}
	return countersOf(ms), nil
}

func (m *binaryManager) Terminate(grace time.Duration) (int, error) { return m.proc.terminate(grace) }
func (m *binaryManager) Kill()                                      { m.proc.kill() }
func (m *binaryManager) LogTail() string                            { return m.proc.tail(30) }

func (m *binaryManager) Exited() (bool, error) {
	if !m.proc.exited() {
		return false, nil
	}
	return true, m.proc.waitErr
}

// inProcessManager runs the manager's code in this process, so that
// runtime/pprof can profile it. Its writes are counted by a wrapping
// transport: this process's own client-go requests would otherwise mix with
// the manager's in rest_client_requests_total.
type inProcessManager struct {
	base   string
	writes *framework.WriteCounter
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func startInProcessManager(ctx context.Context, cfg *rest.Config) (*inProcessManager, error) {
	opts := options.NewOptions()
	opts.LeaderElection.LeaderElect = false
	opts.Generic.HTTPAddress = "127.0.0.1:0"
	opts.Generic.SecureServing = false
	opts.Generic.KubeAPIQPS = -1
	opts.App.IngressDomain = ingressDomain
	counted, writes := framework.CountWrites(rest.CopyConfig(cfg))
	// The manager's own flags would set these; the in-process manager gets
	// the same client settings as the binary.
	counted.ContentType = "application/vnd.kubernetes.protobuf"
	counted.AcceptContentTypes = counted.ContentType + ",application/json"
	ctx, cancel := context.WithCancel(ctx)
	mgr, err := app.NewManager(ctx, opts, app.NewRegistry(), app.WithRESTConfig(counted))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("building the in-process manager: %w", err)
	}
	m := &inProcessManager{base: "http://" + mgr.HTTPAddr().String(), writes: writes, cancel: cancel, done: make(chan struct{})}
	go func() {
		m.err = mgr.Run(ctx)
		close(m.done)
	}()
	return m, nil
}

func (m *inProcessManager) Name() string { return "in-process" }
func (m *inProcessManager) Base() string { return m.base }
func (m *inProcessManager) PID() int     { return os.Getpid() }

func (m *inProcessManager) Counters(ctx context.Context) (managerCounters, error) {
	ms, err := scrape(ctx, m.base)
	if err != nil {
		return managerCounters{}, err
	}
	c := countersOf(ms)
	c.Writes, c.FailedWrites = float64(m.writes.Total()), 0
	c.WritesByMethod = map[string]float64{}
	for request, n := range m.writes.ByRequest() {
		method, _, _ := strings.Cut(request, " ")
		c.WritesByMethod[method] += float64(n)
	}
	return c, nil
}

func (m *inProcessManager) Terminate(grace time.Duration) (int, error) {
	m.cancel()
	select {
	case <-m.done:
		if m.err != nil {
			return 1, nil
		}
		return 0, nil
	case <-time.After(grace):
		return -1, fmt.Errorf("the in-process manager did not stop within %s", grace)
	}
}

func (m *inProcessManager) Kill() { _, _ = m.Terminate(time.Minute) }

func (m *inProcessManager) Exited() (bool, error) {
	select {
	case <-m.done:
		return true, m.err
	default:
		return false, nil
	}
}

func (m *inProcessManager) LogTail() string { return "(in-process: see this command's log)" }

// waitManagerReady waits until the manager serves /readyz, its caches are
// synced and, when it leads, its queues are empty and it has written nothing
// for quietFor: the state before a measurement starts.
func waitManagerReady(ctx context.Context, m manager, timeout, quietFor time.Duration) error {
	var lastWrites float64 = -1
	lastChange := time.Now()
	var why string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := m.Exited(); exited {
			return false, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		status, _, err := httpGet(ctx, m.Base()+"/readyz")
		if err != nil || status != http.StatusOK {
			why = fmt.Sprintf("/readyz: %d %v", status, err)
			return false, nil
		}
		d, err := getDebug(ctx, m.Base())
		if err != nil {
			why = err.Error()
			return false, nil
		}
		if !d.Leading {
			return true, nil // a standby: nothing more to wait for
		}
		c, err := m.Counters(ctx)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		if c.Writes != lastWrites {
			lastWrites, lastChange = c.Writes, time.Now()
		}
		if !d.Synced || !d.queuesEmpty() {
			why = "caches not synced or queues not empty"
			return false, nil
		}
		why = "still writing"
		return time.Since(lastChange) >= quietFor, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for manager %s to be ready and idle (%s): %w", m.Name(), why, err)
	}
	return nil
}
