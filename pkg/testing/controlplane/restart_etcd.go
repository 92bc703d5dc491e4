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
	"time"
)

// RestartEtcd stops etcd (SIGTERM) and starts it again with the same flags,
// ports and data, then waits until it is healthy. kube-apiserver keeps
// running and reconnects, as it would to a real etcd restart. Do not call it
// concurrently with Stop or RestartAPIServer.
func (cp *ControlPlane) RestartEtcd(ctx context.Context) error {
	cp.mu.Lock()
	stopped := cp.stopped
	cp.mu.Unlock()
	old := cp.process(etcdName)
	if stopped || old == nil {
		return errors.New("restarting etcd: the control plane is stopped")
	}
	begin := time.Now()
	// The same command line: the ports are in it, and the data directory.
	c := component{name: etcdName, path: old.cmd.Path, args: old.cmd.Args[1:]}
	old.stop()
	p, err := startProcess(cp.spawner, c, cp.Dir, cp.logs)
	if err != nil {
		cp.untrack(old)
		return err
	}
	cp.replace(old, p)
	ready := func(ctx context.Context) error {
		return httpOK(ctx, cp.probe, cp.EtcdURL+"/health", `"health":"true"`)
	}
	if err := waitReady(ctx, etcdStartTimeout, p, ready); err != nil {
		return err
	}
	cp.logger.V(1).Info("Restarted etcd", "duration", time.Since(begin))
	return nil
}

// replace puts p where old was among the tracked processes, so that Stop
// still ends etcd after kube-apiserver.
func (cp *ControlPlane) replace(old, p *Process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i, q := range cp.procs {
		if q == old {
			cp.procs[i] = p
			return
		}
	}
	cp.procs = append(cp.procs, p)
}
