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

// Command localup runs the full local control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok) with fake nodes until it gets
// SIGINT or SIGTERM. State, logs and the kubeconfig live in <repo>/_local; the
// cluster state there is removed at every start, and a lock keeps a second
// localup out. It prints the line that points kubectl at it.
//
// Use it through hack/local-up.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

func main() {
	klog.InitFlags(nil)
	dir := flag.String("dir", "", "state directory; the cluster state in it is removed at start (default <repo>/_local)")
	readyFile := flag.String("ready-file", "", "file written with the kubeconfig path once the cluster is ready, removed at exit")
	nodes := flag.Int("nodes", 3, "number of fake kwok nodes, named kwok-node-1..N")
	flag.Parse()

	if err := run(*dir, *readyFile, *nodes); err != nil {
		klog.ErrorS(err, "localup failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// lockName is the file in the state directory that one localup at a time holds
// locked.
const lockName = ".lock"

// lockStateDir creates dir and takes its lock, failing if another localup
// holds it: two of them would wipe each other's etcd data.
func lockStateDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock of %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another localup is running with state in %s: %w", dir, err)
	}
	return f, nil
}

func run(dir, readyFile string, nodes int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if dir == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "_local")
	}
	lock, err := lockStateDir(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	// A fresh cluster each time: etcd data from an earlier run would refer to
	// old ports and keys. Other files (hack/run.sh's log) stay.
	if err := controlplane.RemoveState(dir); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.Remove(kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}

	begin := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(startCtx, controlplane.Options{
		Dir:               dir,
		ControllerManager: true,
		Scheduler:         true,
		Kwok:              true,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane")
		}
	}()

	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("kwok-node-%d", i+1)
	}
	if err := cp.CreateFakeNodes(startCtx, names...); err != nil {
		return err
	}

	if err := controlplane.WriteKubeconfig(kubeconfig, cp.Config.Host, controlplane.AdminToken); err != nil {
		return err
	}
	if readyFile != "" {
		if err := os.WriteFile(readyFile, []byte(kubeconfig+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing the ready file: %w", err)
		}
		defer os.Remove(readyFile)
	}
	klog.InfoS("Local control plane ready", "server", cp.Config.Host, "dir", dir, "nodes", len(names), "startup", time.Since(begin).Round(time.Millisecond))
	fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)

	<-ctx.Done()
	klog.InfoS("Stopping the local control plane")
	return nil
}
