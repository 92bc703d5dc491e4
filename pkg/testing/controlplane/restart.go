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

// RestartAPIServer stops kube-apiserver and starts it again with the same
// flags, port and etcd, then waits until it is ready. The other components
// keep running and reconnect, as they would to a real API server restart.
// Do not call it concurrently with Stop.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	stopped := cp.stopped
	cp.mu.Unlock()
	if stopped {
		return errors.New("restarting kube-apiserver: the control plane is stopped")
	}
	begin := time.Now()
	if old := cp.process(apiserverName); old != nil {
		old.stop()
		cp.untrack(old)
	}
	p, err := startProcess(cp.spawner, cp.apiserver, cp.Dir, cp.logs)
	if err != nil {
		return err
	}
	cp.track(p)
	if err := waitReady(ctx, apiserverStartTimeout, p, cp.apiserverReady); err != nil {
		return err
	}
	cp.logger.V(1).Info("Restarted kube-apiserver", "duration", time.Since(begin))
	return nil
}
