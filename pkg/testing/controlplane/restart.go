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
