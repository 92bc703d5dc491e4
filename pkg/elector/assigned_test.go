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

package elector

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// A replica acquires a controller's Lease only while the controller is
// assigned to it, and keeps renewing it while it drains after the
// assignment moved away.
func TestAssignedLockAcquiresOnlyWhatIsAssigned(t *testing.T) {
	ctx := context.Background()
	var mine atomic.Bool
	inner := &memLock{id: "me"}
	l := &assignedLock{Interface: inner, mine: mine.Load}

	if err := l.Create(ctx, ours("me")); !errors.Is(err, errNotAssigned) {
		t.Fatalf("Create while not assigned = %v, want errNotAssigned", err)
	}
	// Released by its holder: shown held, so the elector does not try.
	released := ours("")
	inner.rec = &released
	rec, raw, err := l.Get(ctx)
	if err != nil || rec.HolderIdentity == "" {
		t.Fatalf("Get of a released Lease assigned elsewhere = %q, %v; want a holder shown", rec.HolderIdentity, err)
	}
	if err := l.Update(ctx, ours("me")); !errors.Is(err, errNotAssigned) {
		t.Fatalf("Update while not assigned = %v, want errNotAssigned", err)
	}
	if len(inner.writes) != 0 {
		t.Fatalf("writes while not assigned: %+v", inner.writes)
	}

	// Assigned here: the real record shows again, changed, and is taken.
	mine.Store(true)
	rec2, raw2, err := l.Get(ctx)
	if err != nil || rec2.HolderIdentity != "" || string(raw2) == string(raw) {
		t.Fatalf("Get once assigned = %q (raw changed %t), %v; want the released record", rec2.HolderIdentity, string(raw2) != string(raw), err)
	}
	if err := l.Update(ctx, ours("me")); err != nil {
		t.Fatalf("Update once assigned = %v", err)
	}

	// Assigned elsewhere while holding: renewals (no read first) and the
	// release still go through.
	mine.Store(false)
	if err := l.Update(ctx, ours("me")); err != nil {
		t.Fatalf("renewal while handing over = %v", err)
	}
	if err := l.Update(ctx, ours("")); err != nil {
		t.Fatalf("release = %v", err)
	}
	if err := l.Update(ctx, ours("me")); !errors.Is(err, errNotAssigned) {
		t.Fatalf("acquiring again after the release = %v, want errNotAssigned", err)
	}
	if n := len(inner.writes); n != 3 {
		t.Fatalf("%d writes, want the acquisition, a renewal and the release", n)
	}
}

// tries counts the writes an elector attempts.
type tries struct {
	resourcelock.Interface
	n atomic.Int32
}

func (l *tries) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.n.Add(1)
	return l.Interface.Update(ctx, ler)
}

// With client-go's elector: a replica standing by for a controller
// assigned elsewhere never writes its released Lease, nor tries to (each
// refusal was logged as an error), and takes it at its next try once the
// controller is assigned to it.
func TestAssignedLockWithTheElector(t *testing.T) {
	var mine atomic.Bool
	released := ours("")
	released.LeaseDurationSeconds = 1 // as client-go releases it
	inner := &memLock{id: "me", rec: &released}
	l := &tries{Interface: &assignedLock{Interface: inner, mine: mine.Load}}
	led := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: l, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 20 * time.Millisecond,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(led) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go elector.Run(ctx)
	select {
	case <-led:
		t.Fatal("led a controller assigned elsewhere")
	case <-time.After(1500 * time.Millisecond): // past the released Lease's 1 s
	}
	inner.mu.Lock()
	writes := len(inner.writes)
	inner.mu.Unlock()
	if writes != 0 {
		t.Fatalf("%d writes of a Lease assigned elsewhere", writes)
	}
	if n := l.n.Load(); n != 0 {
		t.Fatalf("the elector tried %d times to take a Lease assigned elsewhere", n)
	}
	mine.Store(true)
	select {
	case <-led:
	case <-time.After(10 * time.Second):
		t.Fatal("did not lead the controller once it was assigned here")
	}
}
