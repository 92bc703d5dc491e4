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

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Names of the components, also the names of their log files.
const (
	etcdName              = "etcd"
	apiserverName         = "kube-apiserver"
	controllerManagerName = "kube-controller-manager"
	schedulerName         = "kube-scheduler"
	kwokName              = "kwok"
)

// Startup deadlines per phase, within whatever deadline Start's ctx has.
const (
	etcdStartTimeout      = 30 * time.Second
	apiserverStartTimeout = 90 * time.Second
	addonStartTimeout     = 90 * time.Second
)

// ControlPlane is a running local control plane. Stop it when done.
type ControlPlane struct {
	// Dir holds the state: etcd data, certificates, kubeconfigs and logs.
	Dir string
	// KubeconfigPath is the admin kubeconfig (user admin, group system:masters).
	KubeconfigPath string
	// Config is the admin rest.Config, with ClientQPS/ClientBurst. Copy it
	// (rest.CopyConfig) before changing it.
	Config *rest.Config
	// Client is an admin clientset built from Config.
	Client kubernetes.Interface
	// EtcdURL is etcd's client URL.
	EtcdURL string

	opts      Options
	bins      binaries
	logger    klog.Logger
	spawner   *Spawner
	logs      *sharedWriter // nil: per-component log files
	removeDir bool
	probe     *http.Client

	// files under Dir
	saKey, saPub, tokenFile string

	mu        sync.Mutex
	procs     []*Process // in start order
	apiserver component  // kept for RestartAPIServer
	stopped   bool
	stopErr   error
}

// Start runs etcd and kube-apiserver, plus the components opts asks for, and
// returns once all of them are ready. ctx bounds the startup only: the
// components run until Stop. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	logger := klog.FromContext(ctx)
	begin := time.Now()
	bins, err := resolveBinaries(opts)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{opts: opts, bins: bins, logger: logger, spawner: NewSpawner(), probe: newProbeClient()}
	if opts.Logs != nil {
		cp.logs = &sharedWriter{w: opts.Logs}
	}
	if opts.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "controlplane-"); err != nil {
			cp.spawner.Close()
			return nil, fmt.Errorf("creating the state directory: %w", err)
		}
		cp.removeDir = true
	} else {
		if cp.Dir, err = filepath.Abs(opts.Dir); err == nil {
			err = os.MkdirAll(cp.Dir, 0o755)
		}
		if err != nil {
			cp.spawner.Close()
			return nil, fmt.Errorf("creating the state directory: %w", err)
		}
	}
	if err := cp.start(ctx); err != nil {
		if stopErr := cp.Stop(); stopErr != nil {
			logger.Error(stopErr, "Cleaning up after a failed start")
		}
		return nil, err
	}
	logger.V(1).Info("Control plane ready", "dir", cp.Dir, "server", cp.Config.Host, "duration", time.Since(begin))
	return cp, nil
}

// Files and directories Start writes into Dir, besides <component>.log.
const (
	etcdDataDir         = "etcd"
	apiserverCertDir    = "apiserver-certs"
	saKeyFile           = "sa.key"
	saPubFile           = "sa.pub"
	tokenFileName       = "tokens.csv"
	adminKubeconfigFile = "admin.kubeconfig"
	kwokHomeDir         = "kwok-home"
)

// RemoveState deletes what Start writes into dir (etcd data, keys,
// certificates, kubeconfigs, component logs) and leaves other files alone, so
// that a kept Dir starts a fresh cluster next time.
func RemoveState(dir string) error {
	names := []string{etcdDataDir, apiserverCertDir, saKeyFile, saPubFile, tokenFileName, adminKubeconfigFile, kwokHomeDir,
		auditPolicyFile, auditLogFile}
	for _, component := range []string{etcdName, apiserverName, controllerManagerName, schedulerName, kwokName} {
		names = append(names, component+".log")
	}
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("removing control plane state: %w", err)
		}
	}
	return nil
}

func (cp *ControlPlane) start(ctx context.Context) error {
	cp.saKey = filepath.Join(cp.Dir, saKeyFile)
	cp.saPub = filepath.Join(cp.Dir, saPubFile)
	cp.tokenFile = filepath.Join(cp.Dir, tokenFileName)
	if err := writeServiceAccountKeys(cp.saKey, cp.saPub); err != nil {
		return err
	}
	if err := cp.writeAuditPolicy(); err != nil {
		return err
	}
	if err := os.WriteFile(cp.tokenFile, []byte(AdminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	if err := cp.startEtcd(ctx); err != nil {
		return err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return err
	}

	// The rest only need the API server: start them together.
	var starts []func(context.Context) error
	if cp.opts.ControllerManager {
		starts = append(starts, cp.startControllerManager)
	}
	if cp.opts.Scheduler {
		starts = append(starts, cp.startScheduler)
	}
	if cp.opts.Kwok {
		starts = append(starts, cp.startKwok)
	}
	errs := make([]error, len(starts))
	var wg sync.WaitGroup
	for i, start := range starts {
		wg.Go(func() { errs[i] = start(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// track records a started process so that Stop ends it.
func (cp *ControlPlane) track(p *Process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.procs = append(cp.procs, p)
}

// untrack forgets a process that has been stopped.
func (cp *ControlPlane) untrack(p *Process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i, q := range cp.procs {
		if q == p {
			cp.procs = append(cp.procs[:i], cp.procs[i+1:]...)
			return
		}
	}
}

// process returns the running process of the named component, or nil.
func (cp *ControlPlane) process(name string) *Process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, p := range cp.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Stop ends every component (SIGTERM, then SIGKILL to its process group after
// a grace period), waits for them to exit and removes Dir if Start created it.
// It is idempotent and safe to call on a partially started control plane.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return cp.stopErr
	}
	cp.stopped = true
	// Clients first, then kube-apiserver, then etcd: each waits for the ones
	// started after it, and the clients among themselves in parallel.
	var core, clients []*Process
	for _, p := range cp.procs {
		if p.Name == etcdName || p.Name == apiserverName {
			core = append(core, p)
		} else {
			clients = append(clients, p)
		}
	}
	var wg sync.WaitGroup
	for _, p := range clients {
		wg.Go(p.stop)
	}
	wg.Wait()
	for i := len(core) - 1; i >= 0; i-- {
		core[i].stop()
	}
	cp.procs = nil
	cp.spawner.Close()
	if cp.removeDir {
		if err := os.RemoveAll(cp.Dir); err != nil {
			cp.stopErr = fmt.Errorf("removing the state directory: %w", err)
		}
	}
	return cp.stopErr
}
