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

package leaseguard

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Lock returns inner, reporting each of its successful acquires and
// renewals to the Guard, and each release or loss of the Lease. Give it to
// client-go's leader election in place of inner.
func (g *Guard) Lock(inner resourcelock.Interface) resourcelock.Interface {
	return &guardedLock{Interface: inner, guard: g}
}

type guardedLock struct {
	resourcelock.Interface
	guard *Guard

	mu sync.Mutex
	// otherHolder is the holder the last read named, when not us.
	otherHolder string
}

// Get ends our hold as soon as the Lease names another holder: someone
// took it (by hand, or after our renewals stalled), and waiting for the
// renew deadline would let us write beside them.
func (l *guardedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ler, raw, err := l.Interface.Get(ctx)
	if err == nil && ler != nil {
		other := ""
		if ler.HolderIdentity != l.Identity() {
			other = ler.HolderIdentity
		}
		l.mu.Lock()
		l.otherHolder = other
		l.mu.Unlock()
		if other != "" {
			l.guard.Lost()
		}
	}
	return ler, raw, err
}

func (l *guardedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.guard.now()
	err := l.Interface.Create(ctx, ler)
	l.observe(sent, ler, err)
	return err
}

// Update refuses to release a Lease that the last read showed held by
// someone else. client-go's release, which runs whenever the renew loop
// ends (ReleaseOnCancel), reads the Lease but decides from the record it
// observed before: a leader that lost the Lease (paused past it, or stolen)
// would overwrite the new holder's Lease with an empty one on its way out,
// letting a third process lead beside the new holder.
func (l *guardedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		l.mu.Lock()
		other := l.otherHolder
		l.mu.Unlock()
		if other != "" {
			l.guard.Lost()
			klog.FromContext(ctx).Info("Not releasing the Lease: it is held by someone else", "lease", l.Describe(), "holder", other)
			return nil
		}
	}
	sent := l.guard.now()
	err := l.Interface.Update(ctx, ler)
	l.observe(sent, ler, err)
	return err
}

// observe counts a successful write of a record naming us as holder as a
// renewal sent at sent. A write naming anyone else (a release writes an
// empty holder) ends our hold, whether or not it succeeded. A failed
// renewal changes nothing: the renew deadline ends the hold if no renewal
// succeeds in time.
func (l *guardedLock) observe(sent time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	if ler.HolderIdentity != l.Identity() {
		l.guard.Lost()
		return
	}
	if err == nil {
		l.guard.Renewed(sent)
	}
}
