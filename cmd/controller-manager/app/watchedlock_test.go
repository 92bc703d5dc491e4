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
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// countingLock counts the reads that reach the API server.
type countingLock struct {
	memLock
	reads int
}

func (l *countingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.reads++
	return l.memLock.Get(ctx)
}

// A unit assigned elsewhere is read from the watch, unless the watch shows
// this replica holding it: an acquisition whose answer was lost leaves it
// the holder of a Lease the lock never read, which it could neither renew
// nor release (seen in make bench: 15 s with nobody leading a shard).
func TestWatchedLockReadsAHeldLeaseFromTheAPIServer(t *testing.T) {
	inner := &countingLock{memLock: memLock{id: "me"}}
	watched := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other")}}
	l := &watchedLock{Interface: inner, lookup: func() (*coordinationv1.Lease, bool) { return watched, true }, mine: func() bool { return false }}
	if _, _, err := l.Get(context.Background()); err != nil || inner.reads != 0 {
		t.Fatalf("a Lease held elsewhere: %d reads of the API server (err %v), want 0", inner.reads, err)
	}
	watched.Spec.HolderIdentity = ptr.To("me")
	if _, _, _ = l.Get(context.Background()); inner.reads != 1 {
		t.Errorf("a Lease the watch shows held here: %d reads of the API server, want 1", inner.reads)
	}
}
