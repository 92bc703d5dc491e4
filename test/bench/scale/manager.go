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

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
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

// binaryManager is the controller-manager binary in a process of its own,
// started by the e2e suite's launcher.
type binaryManager struct {
	p *e2eframework.Process
}

// newLauncher runs the binary as every benchmark manager runs: client-side
// rate limiting off, plain HTTP on loopback, default workers, no webhooks,
// the admin kubeconfig, logs in the artifacts directory.
func newLauncher(cfg config, kubeconfig string) *e2eframework.Launcher {
	l := e2eframework.NewLauncher(cfg.binary, kubeconfig, cfg.artifacts)
	l.PlainHTTP = true
	// No Webhooks balancer: the managers run with --webhooks=false.
	l.Args = []string{"--kube-api-qps=-1", "--app-ingress-domain=" + ingressDomain}
	return l
}

// startBinaryManager runs the binary with args after the common ones and
// waits until its HTTP server answers.
func startBinaryManager(ctx context.Context, l *e2eframework.Launcher, name string, args ...string) (*binaryManager, error) {
	klog.FromContext(ctx).Info("Starting manager", "name", name, "args", strings.Join(args, " "),
		"log", filepath.Join(l.LogDir, "manager-"+name+".log"))
	p, err := l.Start(ctx, "manager-"+name, args...)
	if err != nil {
		return nil, err
	}
	return &binaryManager{p: p}, nil
}

func (m *binaryManager) Name() string    { return m.p.Name }
func (m *binaryManager) Base() string    { return m.p.URL }
func (m *binaryManager) PID() int        { return m.p.Pid() }
func (m *binaryManager) LogPath() string { return m.p.LogPath }

func (m *binaryManager) Counters(ctx context.Context) (managerCounters, error) {
	ms, err := scrape(ctx, m.Base())
	if err != nil {
		return managerCounters{}, err
	}
	return countersOf(ms), nil
}

func (m *binaryManager) Terminate(grace time.Duration) (int, error) {
	err := m.p.Stop(grace)
	return m.p.ExitCode(), err
}
func (m *binaryManager) Kill()           { m.p.Kill() }
func (m *binaryManager) LogTail() string { return m.p.LogTail(30) }

func (m *binaryManager) Exited() (bool, error) {
	if !m.p.Exited() {
		return false, nil
	}
	return true, m.p.Err()
}

// inProcessManager runs the manager's code in this process, so that
// runtime/pprof can profile it. Its writes are counted by a wrapping
// transport: this process's own client-go requests would otherwise mix with
// the manager's in rest_client_requests_total.
type inProcessManager struct {
	m *framework.Manager
}

func startInProcessManager(ctx context.Context, admin *rest.Config, mutate ...func(*options.Options)) (*inProcessManager, error) {
	// The manager's own flags would set these; the in-process manager gets
	// the same client settings as the binary.
	cfg := rest.CopyConfig(admin)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = cfg.ContentType + ",application/json"
	m, err := framework.RunManager(ctx, cfg, app.NewRegistry(), func(o *options.Options) {
		o.Generic.KubeAPIQPS = -1
		o.App.IngressDomain = ingressDomain
		for _, f := range mutate {
			f(o)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("building the in-process manager: %w", err)
	}
	return &inProcessManager{m: m}, nil
}

func (m *inProcessManager) Name() string { return "in-process" }
func (m *inProcessManager) Base() string { return m.m.URL }
func (m *inProcessManager) PID() int     { return os.Getpid() }

func (m *inProcessManager) Counters(ctx context.Context) (managerCounters, error) {
	ms, err := scrape(ctx, m.Base())
	if err != nil {
		return managerCounters{}, err
	}
	c := countersOf(ms)
	c.Writes, c.FailedWrites = float64(m.m.Writes.Total()), 0
	c.WritesByMethod = map[string]float64{}
	for request, n := range m.m.Writes.ByRequest() {
		method, _, _ := strings.Cut(request, " ")
		c.WritesByMethod[method] += float64(n)
	}
	return c, nil
}

func (m *inProcessManager) Terminate(time.Duration) (int, error) {
	err := m.m.Stop()
	if exited, runErr := m.Exited(); !exited {
		return -1, err
	} else if runErr != nil {
		return 1, nil
	}
	return 0, nil
}

func (m *inProcessManager) Kill() { _, _ = m.Terminate(time.Minute) }

func (m *inProcessManager) Exited() (bool, error) {
	select {
	case <-m.m.Done():
		return true, m.m.Err()
	default:
		return false, nil
	}
}

func (m *inProcessManager) LogTail() string { return "(in-process: see this command's log)" }

// idleWaiter is a manager (the peer) with its own way of telling it is
// ready and idle.
type idleWaiter interface {
	waitIdle(ctx context.Context, timeout, quietFor time.Duration) error
}

// waitManagerReady waits until the manager reports its caches
// synced and, when it leads, its queues are empty and it has written nothing
// for quietFor: the state before a measurement starts.
func waitManagerReady(ctx context.Context, m manager, timeout, quietFor time.Duration) error {
	if w, ok := m.(idleWaiter); ok {
		return w.waitIdle(ctx, timeout, quietFor)
	}
	var lastWrites float64 = -1
	lastChange := time.Now()
	var why string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := m.Exited(); exited {
			return false, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		status, _, err := httpGet(ctx, m.Base()+"/readyz/informer-sync")
		if err != nil || status != http.StatusOK {
			why = fmt.Sprintf("/readyz/informer-sync: %d %v", status, err)
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
		if !d.Synced || !d.QueuesEmpty() {
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
