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
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A leader that shuts down cancels its election while a renewal may be in
// flight, and the API server can commit that abandoned renewal after
// client-go's release has read the Lease: the release then conflicts.
// TestPerControllerStopsWhenAControllerCannotBeRebuilt met it on a fresh
// machine ("Failed to release lease ... the object has been modified"), and
// the Lease stayed held for a whole lease duration. lateRenewalLock replays
// that order every time: when the release reads the Lease, the holder's
// renewal lands behind its back. The Lease must still end up released.
func TestShutdownReleasesTheLeaseAfterALateRenewal(t *testing.T) {
	for _, perController := range []bool{false, true} {
		t.Run(fmt.Sprintf("per-controller=%v", perController), func(t *testing.T) {
			ctx := context.Background()
			ns := framework.CreateNamespace(t, cp.Client)
			const name = "late"
			lease := ingressLease(name, perController)
			late := &lateRenewals{}
			m := framework.StartManager(t, cp.Config, func(o *options.Options) {
				shortLease(ns, name)(o)
				// Long, so that only a release can free the Lease before the test ends.
				o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 60 * time.Second}
				o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 40 * time.Second}
				o.Generic.Controllers = []string{ingress.ControllerName}
				o.Generic.ShutdownTimeout = 10 * time.Second
				o.HA.PerController = perController
			}, app.WithLeaseLock(late.wrap))
			framework.Eventually(t, 30*time.Second, "the manager to lead", func(context.Context) (bool, error) {
				return controllersLed(t, m)[ingress.ControllerName], nil
			})

			late.armed.Store(true)
			if err := m.Stop(); err != nil {
				t.Fatalf("a clean shutdown returned %v, want nil", err)
			}
			if err := late.err.Load(); err != nil {
				t.Fatalf("the late renewal: %v", *err)
			}
			if !late.done.Load() {
				t.Fatal("the release never read the Lease it held, so no renewal was slipped in before it")
			}
			l, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				t.Fatalf("the Lease is still held by %s after a clean shutdown: a standby would wait %ds for it", *h, *l.Spec.LeaseDurationSeconds)
			}
		})
	}
}

// ingressLease is the Lease the ingress controller runs under when the
// manager's Lease is called name.
func ingressLease(name string, perController bool) string {
	if perController {
		return name + "-" + ingress.ControllerName
	}
	return name
}

// lateRenewals slips one renewal of the Lease, by its own holder, in after
// the first read of the Lease that finds this instance holding it once
// armed. A leader reads its Lease only when a renewal fails and when it
// releases it, so armed just before the shutdown, that read is the release's.
type lateRenewals struct {
	armed, done atomic.Bool
	err         atomic.Pointer[error]
}

func (r *lateRenewals) wrap(inner resourcelock.Interface) resourcelock.Interface {
	return &lateRenewalLock{Interface: inner, r: r}
}

type lateRenewalLock struct {
	resourcelock.Interface
	r *lateRenewals
}

func (l *lateRenewalLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	if err == nil && record.HolderIdentity == l.Identity() && l.r.armed.CompareAndSwap(true, false) {
		if renewErr := renewBehindTheHoldersBack(ctx, l.Describe()); renewErr != nil {
			l.r.err.Store(&renewErr)
		}
		l.r.done.Store(true)
	}
	return record, raw, err
}

// renewBehindTheHoldersBack writes the Lease described as namespace/name
// with a new renewTime and nothing else changed, as the holder's abandoned
// renewal would when the API server commits it late.
func renewBehindTheHoldersBack(ctx context.Context, described string) error {
	ns, name, ok := strings.Cut(described, "/")
	if !ok {
		return fmt.Errorf("cannot tell the Lease from %q", described)
	}
	leases := cp.Client.CoordinationV1().Leases(ns)
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
