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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// memLock is a Lease kept in memory; before, when set, runs before each write.
type memLock struct {
	id     string
	mu     sync.Mutex
	rec    *resourcelock.LeaderElectionRecord
	writes []resourcelock.LeaderElectionRecord
	before func()
}

func (l *memLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "x")
	}
	r := *l.rec
	return &r, []byte(r.HolderIdentity + r.RenewTime.String()), nil
}

func (l *memLock) write(ler resourcelock.LeaderElectionRecord) error {
	if l.before != nil {
		l.before()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = &ler
	l.writes = append(l.writes, ler)
	return nil
}

func (l *memLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler)
}
func (l *memLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ler)
}
func (l *memLock) RecordEvent(string) {}
func (l *memLock) Identity() string   { return l.id }
func (l *memLock) Describe() string   { return "mem/" + l.id }

func ours(id string) resourcelock.LeaderElectionRecord {
	now := metav1.Now()
	return resourcelock.LeaderElectionRecord{HolderIdentity: id, AcquireTime: now, RenewTime: now}
}

func TestElectionAttemptWokenCannotAcquire(t *testing.T) {
	ctx := context.Background()
	a := &electionAttempts{}
	inner := &memLock{id: "me"}
	lock := a.lock(inner)

	// A write after wake is refused without reaching the API.
	_, cancel := context.WithCancel(ctx)
	a.begin(cancel)
	a.wake()
	if err := lock.Update(ctx, ours("me")); !errors.Is(err, errAttemptEnded) {
		t.Fatalf("a write after wake returned %v, want errAttemptEnded", err)
	}
	if len(inner.writes) != 0 {
		t.Fatalf("a woken attempt wrote the Lease: %v", inner.writes)
	}
	if !a.end() {
		t.Fatal("end did not report the wake")
	}

	// A write that succeeds while the attempt is woken is reported failed,
	// so the elector does not lead on an ended attempt.
	a.begin(cancel)
	inner.before = a.wake
	if err := lock.Update(ctx, ours("me")); !errors.Is(err, errAttemptEnded) {
		t.Fatalf("a write that raced wake returned %v, want errAttemptEnded", err)
	}
	a.end()

	// Once an attempt acquired, wake leaves it alone: renewals and the
	// release go on.
	inner.before = nil
	woken := false
	a.begin(func() { woken = true })
	if err := lock.Update(ctx, ours("me")); err != nil {
		t.Fatal(err)
	}
	a.wake()
	if woken {
		t.Fatal("wake ended an attempt that holds the Lease")
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatalf("the release was refused: %v", err)
	}
	if a.end() {
		t.Fatal("end reported a wake for an attempt that held the Lease")
	}
}

// The elector stamps the record before the spread delay; the Lease must say
// when it was acquired, on the first write and on every renewal after it.
func TestSpreadLockStampsAcquireTimeAfterItsTurn(t *testing.T) {
	ctx := context.Background()
	s := newSpread(50 * time.Millisecond) // a turn is 100 ms per Lease held
	s.held = 2
	inner := &memLock{id: "me"}
	l := s.lock(inner)

	ler := ours("me")
	if err := l.Update(ctx, ler); err != nil {
		t.Fatal(err)
	}
	first := inner.writes[0]
	if waited := first.AcquireTime.Sub(ler.AcquireTime.Time); waited < 150*time.Millisecond {
		t.Fatalf("acquireTime %s is %s after the elector's stamp, want the time after the 200 ms turn", first.AcquireTime, waited)
	}
	if !first.RenewTime.Equal(&first.AcquireTime) {
		t.Errorf("renewTime %s differs from acquireTime %s on the acquiring write", first.RenewTime, first.AcquireTime)
	}

	// client-go renews with the acquire time it stamped itself.
	renewal := ours("me")
	renewal.AcquireTime = ler.AcquireTime
	if err := l.Update(ctx, renewal); err != nil {
		t.Fatal(err)
	}
	if got := inner.writes[1].AcquireTime; !got.Equal(&first.AcquireTime) {
		t.Errorf("a renewal wrote acquireTime %s, want %s", got, first.AcquireTime)
	}
}
