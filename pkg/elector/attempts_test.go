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
	"sync"
	"testing"

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
	// raw, if set, is the raw record Get returns.
	raw []byte
}

func (l *memLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "x")
	}
	r := *l.rec
	if l.raw != nil {
		return &r, l.raw, nil
	}
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
	a := &Attempts{}
	inner := &memLock{id: "me"}
	lock := a.Lock(inner)

	// A write after wake is refused without reaching the API.
	_, cancel := context.WithCancel(ctx)
	a.begin(cancel)
	a.Wake()
	if err := lock.Update(ctx, ours("me")); !errors.Is(err, errAttemptEnded) {
		t.Fatalf("a write after wake returned %v, want errAttemptEnded", err)
	}
	if len(inner.writes) != 0 {
		t.Fatalf("a woken attempt wrote the Lease: %v", inner.writes)
	}
	if !a.end() {
		t.Fatal("end did not report the wake")
	}

	// A wake during a write waits for its answer: one that acquired goes
	// on (ending it would lose the acquisition, and the next attempt would
	// read the Lease before it and be refused by a conflict)...
	ended := false
	a.begin(func() { ended = true })
	inner.before = a.Wake
	if err := lock.Update(ctx, ours("me")); err != nil {
		t.Fatalf("a write that raced wake returned %v, want it to acquire", err)
	}
	if ended || a.end() {
		t.Fatal("a wake during a write that acquired ended the attempt")
	}
	// ...and one that failed ends the attempt then, for a fresh one.
	failing := &failingLock{memLock: memLock{id: "me"}}
	a.begin(func() { ended = true })
	failing.before = a.Wake
	if err := a.Lock(failing).Update(ctx, ours("me")); err == nil {
		t.Fatal("the failing write succeeded")
	}
	if !ended || !a.end() {
		t.Fatal("a wake during a write that failed did not end the attempt")
	}

	// Once an attempt acquired, wake leaves it alone: renewals and the
	// release go on.
	inner.before = nil
	woken := false
	a.begin(func() { woken = true })
	if err := lock.Update(ctx, ours("me")); err != nil {
		t.Fatal(err)
	}
	a.Wake()
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

// failingLock refuses every write, after calling before.
type failingLock struct{ memLock }

func (l *failingLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	if l.before != nil {
		l.before()
	}
	return errors.New("conflict")
}
