package controlplane

import (
	"context"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// runMainStartTimeout bounds the startup in RunMain.
const runMainStartTimeout = 3 * time.Minute

// RunMain starts a control plane with opts, hands it to set, runs the tests and
// stops the plane. Its result is the exit code for os.Exit:
//
//	func TestMain(m *testing.M) {
//		os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
//	}
func RunMain(m *testing.M, opts Options, set func(*ControlPlane)) int {
	defer klog.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), runMainStartTimeout)
	cp, err := Start(ctx, opts)
	cancel()
	if err != nil {
		klog.ErrorS(err, "Starting the control plane for the tests")
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane")
		}
	}()
	set(cp)
	return m.Run()
}
