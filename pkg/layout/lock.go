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

package layout

import (
	"context"
	"errors"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// ErrFenced refuses a Lease write while another layout is the group's.
var ErrFenced = errors.New("another Lease layout leads the group")

// fencedHolder is the holder shown to the elector while the fence refuses
// to acquire, so that it waits as for a held Lease instead of trying, and
// logging a refusal, every retry period.
const fencedHolder = "(another Lease layout leads the group)"

// Lock wraps a unit Lease's lock (labelled with Labels) so that it is
// acquired only while the fence admits it and renewed only while this
// replica's layout is the group's. Releases always pass.
func (f *Fence) Lock(inner resourcelock.Interface) resourcelock.Interface {
	return &fencedLock{Interface: inner, f: f}
}

type fencedLock struct {
	resourcelock.Interface
	f *Fence

	mu      sync.Mutex
	holding bool // the last read or write named this replica
}

// Get shows the elector a Lease it may not acquire as held by another
// layout, and a tombstone it may take as released.
func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		return rec, raw, err
	}
	held := err == nil && rec.HolderIdentity == l.Identity()
	l.setHolding(held)
	if held {
		return rec, raw, err
	}
	if l.f.admit(ctx) != nil {
		now := metav1.NewTime(l.f.cfg.Clock.Now())
		shown := resourcelock.LeaderElectionRecord{HolderIdentity: fencedHolder, LeaseDurationSeconds: fencedSeconds,
			AcquireTime: now, RenewTime: now}
		// Always the same, so that the elector sees no change while fenced,
		// and a change when the real record shows again.
		return &shown, []byte(fencedHolder), nil
	}
	if err == nil && isTombstone(rec.HolderIdentity) {
		shown := *rec
		shown.HolderIdentity, shown.LeaseDurationSeconds = "", 1
		return &shown, append(raw[:len(raw):len(raw)], tombstonePrefix...), nil
	}
	return rec, raw, err
}

func (l *fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := l.f.admit(ctx); err != nil {
		return err
	}
	return l.acquired(ctx, ler, l.Interface.Create(ctx, ler))
}

func (l *fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	holding := l.holding
	l.mu.Unlock()
	switch {
	case ler.HolderIdentity != l.Identity(): // a release
		err := l.Interface.Update(ctx, ler)
		if err == nil {
			l.setHolding(false)
		}
		return err
	case holding:
		if !l.f.mayRenew() {
			return ErrFenced
		}
		return l.Interface.Update(ctx, ler)
	}
	if err := l.f.admit(ctx); err != nil {
		return err
	}
	return l.acquired(ctx, ler, l.Interface.Update(ctx, ler))
}

// acquired confirms an acquisition written with err: if another layout was
// stated for the group before it, the Lease is released at once, never
// having led.
func (l *fencedLock) acquired(ctx context.Context, ler resourcelock.LeaderElectionRecord, err error) error {
	if err != nil {
		return err
	}
	if err := l.f.confirm(ctx); err != nil {
		now := metav1.NewTime(l.f.cfg.Clock.Now())
		release := resourcelock.LeaderElectionRecord{LeaderTransitions: ler.LeaderTransitions, LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}
		if relErr := l.Interface.Update(ctx, release); relErr != nil {
			klog.FromContext(ctx).Error(relErr, "Cannot release a Lease acquired as another layout became the group's; it expires", "lease", l.Describe())
		}
		return err
	}
	l.setHolding(true)
	return nil
}

func (l *fencedLock) setHolding(h bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holding = h
}

func isTombstone(holder string) bool { return strings.HasPrefix(holder, tombstonePrefix) }
