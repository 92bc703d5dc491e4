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

package manager

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// probe is a controller with one key whose reconcile waits, in flight, until
// the test lets it write a ConfigMap or its context is cancelled.
type probe struct {
	name    string
	started chan struct{} // closed when the reconcile is in flight
	proceed chan struct{} // closed by the test to let it write
	outcome chan error    // ctx.Err() if cancelled first, else the write's error

	client kubernetes.Interface
	ns     string
	once   sync.Once
}

func newProbe(ns string) *probe {
	return &probe{name: "probe", ns: ns, started: make(chan struct{}), proceed: make(chan struct{}),
		outcome: make(chan error, 1)}
}

func (p *probe) registry() app.Registry {
	return app.Registry{{
		Name: p.name,
		New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
			client, err := cc.KubeClient(p.name)
			p.client = client
			return p, err
		},
	}}
}

func (p *probe) Name() string { return p.name }

func (p *probe) Run(ctx context.Context) {
	queue := controller.NewQueue(p.name + "-" + p.ns)
	queue.Add(controller.Key{Name: "only"})
	w := &controller.Worker{Name: p.name, Queue: queue, Reconcile: p.reconcile}
	w.Run(ctx, 1)
}

func (p *probe) reconcile(ctx context.Context, _ controller.Key) (controller.Result, error) {
	first := false
	p.once.Do(func() { first = true; close(p.started) })
	if !first {
		return controller.Result{}, nil
	}
	select {
	case <-ctx.Done():
		p.outcome <- ctx.Err()
		return controller.Result{}, ctx.Err()
	case <-p.proceed:
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-by-probe"}}
	_, err := p.client.CoreV1().ConfigMaps(p.ns).Create(ctx, cm, metav1.CreateOptions{})
	p.outcome <- err
	return controller.Result{}, err
}

func shortLease(ns, name string) func(*options.Options) {
	return func(o *options.Options) {
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = ns
		o.LeaderElection.ResourceName = name
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 4 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 500 * time.Millisecond}
		// Long, so that only cancellation can explain a prompt exit.
		o.Generic.ShutdownTimeout = time.Minute
	}
}

// Losing the Lease must cancel every reconcile in flight at once and make
// Run return promptly, not after --shutdown-timeout: a standby may already
// be writing.
func TestLosingTheLeaseCancelsReconcilesInFlight(t *testing.T) {
	ns := framework.CreateNamespace(t, cp.Client)
	p := newProbe(ns)
	m := framework.StartManagerWith(t, cp.Config, p.registry(), shortLease(ns, "lost-in-flight"))
	select {
	case <-p.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the probe's reconcile never started")
	}

	stealLease(t, ns, "lost-in-flight")
	stolen := time.Now()
	select {
	case err := <-p.outcome:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the reconcile in flight ended with %v, want its context cancelled", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the reconcile in flight was not cancelled within 15 s of losing the Lease")
	}
	select {
	case <-m.Done():
		if !errors.Is(m.Err(), app.ErrLeaderElectionLost) {
			t.Fatalf("Run returned %v, want ErrLeaderElectionLost", m.Err())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15 s of losing the Lease")
	}
	t.Logf("Run returned %s after the Lease was stolen", time.Since(stolen).Round(10*time.Millisecond))
}

// A leader whose renewals stall (a paused process, as SIGSTOP or a VM
// stall would leave it: the election loop has not yet noticed anything)
// must not send a write once its last renewal is older than the renew
// deadline.
func TestStalledRenewalsRefuseWrites(t *testing.T) {
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	p := newProbe(ns)
	var stall atomic.Bool
	unstall := make(chan struct{})
	stalling := func(inner resourcelock.Interface) resourcelock.Interface {
		return &stallingLock{Interface: inner, stall: &stall, unstall: unstall}
	}
	framework.StartManagerWith(t, cp.Config, p.registry(), shortLease(ns, "stalled"), app.WithLeaseLock(stalling))
	t.Cleanup(func() { close(unstall) }) // runs before the manager is stopped
	select {
	case <-p.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the probe's reconcile never started")
	}

	stall.Store(true)
	// Wait until the Lease's last renewal is older than the renew deadline.
	framework.Eventually(t, 20*time.Second, "the Lease to go unrenewed past the renew deadline", func(ctx context.Context) (bool, error) {
		lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, "stalled", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return time.Since(lease.Spec.RenewTime.Time) > 2500*time.Millisecond, nil
	})
	close(p.proceed)
	select {
	case err := <-p.outcome:
		if !errors.Is(err, leaseguard.ErrLeaseNotHeld) {
			t.Fatalf("the stale leader's write returned %v, want it refused with ErrLeaseNotHeld", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the probe's write neither happened nor failed")
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "written-by-probe", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the stale leader's ConfigMap reached the API server (get: %v)", err)
	}
}

// stallingLock blocks renewals while stall is set, until unstall is closed,
// ignoring their context as a paused process would.
type stallingLock struct {
	resourcelock.Interface
	stall   *atomic.Bool
	unstall chan struct{}
}

func (l *stallingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.stall.Load() {
		<-l.unstall
	}
	return l.Interface.Update(ctx, ler)
}

func stealLease(t *testing.T, ns, name string) {
	t.Helper()
	stealLeaseFor(t, ns, name, time.Hour)
}

// stealLeaseFor makes the named Lease another holder's for d.
func stealLeaseFor(t *testing.T, ns, name string, d time.Duration) {
	t.Helper()
	leases := cp.Client.CoordinationV1().Leases(ns)
	framework.Eventually(t, 10*time.Second, "the Lease "+name+" to be stolen", func(ctx context.Context) (bool, error) {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		thief, seconds := "thief", int32(d/time.Second)
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &thief, &seconds
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err == nil, err
	})
}
