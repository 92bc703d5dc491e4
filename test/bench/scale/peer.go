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
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

const scenarioNamePeer = "peer"

// peerNamespace and peerPhase: the peer's Apps, labelled so that the peer
// caches and reconciles only them (the manager's own Apps are elsewhere).
const (
	peerNamespace = "bench-peer"
	peerPhase     = "peer"
)

// peerManager is test/bench/peer's controller-runtime operator in its own
// process, started by the same launcher as the manager with the same client
// flags. It has no /debug/controllers: it is idle when its work queue is
// empty and it has written nothing for a while.
type peerManager struct{ binaryManager }

func (m *peerManager) Counters(ctx context.Context) (managerCounters, error) {
	c, err := m.binaryManager.Counters(ctx)
	if err != nil {
		return c, err
	}
	// controller-runtime's process collector, checked against /proc.
	if t, err := procTimes(m.PID()); err == nil {
		c.CPUSeconds = t.Seconds()
	}
	return c, nil
}

// waitIdle waits for synced caches, an empty work queue and no write for
// quietFor.
func (m *peerManager) waitIdle(ctx context.Context, timeout, quietFor time.Duration) error {
	var lastWrites float64 = -1
	lastChange := time.Now()
	why := "starting"
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := m.Exited(); exited {
			return false, fmt.Errorf("peer %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		if status, _, err := httpGet(ctx, m.Base()+"/readyz"); err != nil || status != 200 {
			why = fmt.Sprintf("/readyz: %d %v", status, err)
			return false, nil
		}
		ms, err := scrape(ctx, m.Base())
		if err != nil {
			why = err.Error()
			return false, nil
		}
		c := countersOf(ms)
		if c.Writes != lastWrites {
			lastWrites, lastChange = c.Writes, time.Now()
		}
		if depth := ms.sum("workqueue_depth", nil); depth > 0 {
			why = fmt.Sprintf("%.0f keys queued", depth)
			return false, nil
		}
		why = "still writing"
		return time.Since(lastChange) >= quietFor, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for peer %s to be ready and idle (%s): %w", m.Name(), why, err)
	}
	return nil
}

// peerResult is the peer's App convergence and ours, side by side, round
// by round: ours is the manager binary with the App controller alone, the
// work the peer does, measured the same way (to convergence). Rounds
// alternate which goes first; a single run of either moves by a fifth from
// one run to the next on this machine.
type peerResult struct {
	peer, ours []convergence
	// peerProf and oursProf are the first round's profiles
	// (--peer-profile); nil without.
	peerProf, oursProf *processProfiles
}

// processProfiles are a process's CPU profile over the start of its
// convergence and its heap profile (after a GC) at convergence.
type processProfiles struct {
	cpu                   cpuBreakdown
	heapFile, heapSummary string
	heapTop               []string
}

// peerNamespaces are the namespaces of round r's Apps, ours and the peer's.
func peerNamespaces(r int) (ours, peer string) {
	return fmt.Sprintf("bench-peer-ours-%d", r), fmt.Sprintf("%s-%d", peerNamespace, r)
}

// scenarioPeer converges cfg.apps Apps with the manager's App controller
// alone and with the peer, cfg.peerRounds times each, figures taken at
// convergence, and deletes each one's Apps before the next, so that no
// later manager meets them.
func scenarioPeer(ctx context.Context, c *cluster, cfg config, ml *e2eframework.Launcher) (peerResult, error) {
	var res peerResult
	for r := range cfg.peerRounds {
		oursNS, peerNS := peerNamespaces(r)
		var oursCPU, peerCPU *processProfiles
		if r == 0 && cfg.peerProfile > 0 {
			oursCPU, peerCPU = &processProfiles{}, &processProfiles{}
			res.oursProf, res.peerProf = oursCPU, peerCPU
		}
		runOurs := func() error {
			ours, err := oursAppOnly(ctx, c, cfg, ml, oursNS, oursCPU)
			if err != nil {
				return fmt.Errorf("the manager with the App controller alone, round %d: %w", r+1, err)
			}
			res.ours = append(res.ours, ours)
			return nil
		}
		runPeer := func() error {
			peer, err := peerApps(ctx, c, cfg, peerNS, peerCPU)
			if err != nil {
				return fmt.Errorf("round %d: %w", r+1, err)
			}
			res.peer = append(res.peer, peer)
			return nil
		}
		first, second := runOurs, runPeer
		if r%2 == 1 {
			first, second = runPeer, runOurs
		}
		if err := first(); err != nil {
			return res, err
		}
		if err := second(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// creationWatcher is a manager told when a measurement starts creating
// objects (measureConvergence).
type creationWatcher interface {
	creating()
}

// profiledManager takes a CPU profile of m when the creates start.
type profiledManager struct {
	manager
	start func()
}

func (m profiledManager) creating() { m.start() }

// profiledConvergence converges the Apps with converge and, when prof is
// set, takes a CPU profile of m's first cfg.peerProfile from the first
// create, and a heap profile once it converged, into files named after who.
func profiledConvergence(ctx context.Context, cfg config, m manager, who string, prof *processProfiles, converge func(manager) (convergence, error)) (convergence, error) {
	if prof == nil {
		return converge(m)
	}
	cpuFile := filepath.Join(cfg.artifacts, "cpu-peer-"+who+".pprof")
	wait := func() error { return fmt.Errorf("no create started the profile") }
	conv, err := converge(profiledManager{manager: m, start: func() {
		wait = fetchCPUProfile(ctx, m.Base(), cpuFile, cfg.peerProfile)
	}})
	if err == nil {
		prof.heapFile = filepath.Join(cfg.artifacts, "heap-peer-"+who+".pprof")
		err = fetchProfile(ctx, m.Base()+"/debug/pprof/heap?gc=1", prof.heapFile)
	}
	if perr := wait(); err == nil && perr != nil {
		return conv, fmt.Errorf("CPU profile: %w", perr)
	}
	if err != nil {
		return conv, err
	}
	if prof.heapSummary, prof.heapTop, err = heapTop(ctx, prof.heapFile, profileTopEntries); err != nil {
		return conv, err
	}
	prof.cpu, err = breakDown(ctx, cpuFile, cpuParts)
	return conv, err
}

// oursAppOnly is the manager's half of the peer scenario: --controllers=app,
// no leader election, the same client flags as every manager, profiles
// served (as the peer's are) whether or not this round takes one.
func oursAppOnly(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, ns string, prof *processProfiles) (convergence, error) {
	logger := klog.FromContext(ctx)
	m, err := startBinaryManager(ctx, l, "app-only", append([]string{"--leader-elect=false", "--profiling", "--controllers=" + appcontroller.ControllerName}, cfg.managerArgs...)...)
	if err != nil {
		return convergence{}, err
	}
	defer func() {
		if code, err := m.Terminate(time.Minute); err != nil || code != 0 {
			logger.Info("The App-only manager did not stop cleanly", "exitCode", code, "err", err)
		}
	}()
	if err := waitManagerReady(ctx, m, 5*time.Minute, 3*time.Second); err != nil {
		return convergence{}, err
	}
	conv, err := profiledConvergence(ctx, cfg, m, "ours", prof, func(m manager) (convergence, error) {
		return convergeApps(ctx, c, cfg, m, "app-only", ns, map[string]string{benchLabel: peerPhase}, cfg.apps, false)
	})
	if err != nil {
		return conv, err
	}
	if _, err := m.Terminate(time.Minute); err != nil {
		return conv, err
	}
	return conv, c.deleteNamespace(ctx, ns, cfg.cleanupTimeout)
}

// peerApps is the peer's half of the peer scenario.
func peerApps(ctx context.Context, c *cluster, cfg config, ns string, prof *processProfiles) (convergence, error) {
	logger := klog.FromContext(ctx)
	l := e2eframework.NewLauncher(cfg.peerBinary, c.kubeconfig, cfg.artifacts)
	defer l.Close()
	l.PlainHTTP = true
	l.Args = []string{"--kube-api-qps=-1", "--app-ingress-domain=" + ingressDomain, "--app-selector=" + benchLabel + "=" + peerPhase}
	logger.Info("Starting the peer", "binary", cfg.peerBinary)
	p, err := l.Start(ctx, "peer")
	if err != nil {
		return convergence{}, err
	}
	m := &peerManager{binaryManager{p: p}}
	defer func() {
		if code, err := m.Terminate(time.Minute); err != nil || code != 0 {
			logger.Info("The peer did not stop cleanly", "exitCode", code, "err", err)
		}
	}()
	if err := m.waitIdle(ctx, 5*time.Minute, 3*time.Second); err != nil {
		return convergence{}, err
	}
	conv, err := profiledConvergence(ctx, cfg, m, "peer", prof, func(m manager) (convergence, error) {
		return convergeApps(ctx, c, cfg, m, scenarioNamePeer, ns, map[string]string{benchLabel: peerPhase}, cfg.apps, false)
	})
	if err != nil {
		return conv, fmt.Errorf("peer: %w", err)
	}
	if _, err := m.Terminate(time.Minute); err != nil {
		return conv, err
	}
	return conv, c.deleteNamespace(ctx, ns, cfg.cleanupTimeout)
}
