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

package app

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// skewedLock stamps the times of the records it writes with a clock off by
// skew, as a replica with a wrong wall clock does.
type skewedLock struct {
	resourcelock.Interface
	skew time.Duration
}

func (l skewedLock) shift(ler resourcelock.LeaderElectionRecord) resourcelock.LeaderElectionRecord {
	ler.AcquireTime = metav1.NewTime(ler.AcquireTime.Add(l.skew))
	ler.RenewTime = metav1.NewTime(ler.RenewTime.Add(l.skew))
	return ler
}

func (l skewedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Interface.Create(ctx, l.shift(ler))
}

func (l skewedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Interface.Update(ctx, l.shift(ler))
}

// TestSpreadSkewAgainstTheAPIServer: replica a decides to take a released
// Lease and waits its spread turn; meanwhile replica b, whose clock is off
// by ±30 s, takes it and keeps renewing. a must not take it: the Lease's
// holder history, watched, never shows a second holder while b renews.
func TestSpreadSkewAgainstTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	const ns = metav1.NamespaceDefault

	for _, skew := range []time.Duration{-30 * time.Second, 30 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			name := "skew" + map[bool]string{true: "-behind", false: "-ahead"}[skew < 0]
			leases := cp.Client.CoordinationV1().Leases(ns)
			created, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			newLock := func(id string) resourcelock.Interface {
				l, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, cp.Client.CoreV1(), cp.Client.CoordinationV1(),
					resourcelock.ResourceLockConfig{Identity: id})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}

			// The holder history, as the API server serves it.
			w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: created.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var (
				mu      sync.Mutex
				holders []string
			)
			go func() {
				for ev := range w.ResultChan() {
					if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
						mu.Lock()
						if n := len(holders); n == 0 || holders[n-1] != *l.Spec.HolderIdentity {
							holders = append(holders, *l.Spec.HolderIdentity)
						}
						mu.Unlock()
					}
				}
			}()

			// a reads the released Lease and will try for it after its turn.
			s := newSpread(time.Second) // a turn of 2 s per Lease held
			s.held = 1
			a := s.lock(newLock("a"))
			if _, _, err := a.Get(ctx); err != nil {
				t.Fatal(err)
			}

			// b, with its skewed clock, takes the Lease and renews it.
			bCtx, stopB := context.WithCancel(ctx)
			defer stopB()
			b, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: skewedLock{Interface: newLock("b"), skew: skew}, LeaseDuration: 15 * time.Second,
				RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond, Name: name,
				Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
			})
			if err != nil {
				t.Fatal(err)
			}
			go b.Run(bCtx)
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return b.IsLeader(), nil
			}); err != nil {
				t.Fatalf("b never led: %v", err)
			}

			now := metav1.NewTime(time.Now())
			err = a.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 15,
				AcquireTime: now, RenewTime: now, LeaderTransitions: 1})
			// b renews for ten more retry periods; its Lease must stay its own.
			since := time.Now()
			_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return time.Since(since) > 2*time.Second, nil
			})
			if !b.IsLeader() {
				t.Errorf("b lost the Lease it was renewing")
			}
			mu.Lock()
			got := append([]string(nil), holders...)
			mu.Unlock()
			if len(got) != 1 || got[0] != "b" {
				t.Fatalf("holder history %q while b (clock off by %s) renewed, want only b; a's write: %v", got, skew, err)
			}
			if !errors.Is(err, errTakenMeanwhile) {
				t.Fatalf("a's acquisition = %v, want errTakenMeanwhile", err)
			}
		})
	}
}
