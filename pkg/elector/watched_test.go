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
	"bytes"
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	l := &watchedLock{Interface: inner, lease: &WatchedLease{lookup: func() (*coordinationv1.Lease, bool) { return watched, true }}, mine: func() bool { return false }}
	if _, _, err := l.Get(context.Background()); err != nil || inner.reads != 0 {
		t.Fatalf("a Lease held elsewhere: %d reads of the API server (err %v), want 0", inner.reads, err)
	}
	watched.Spec.HolderIdentity = ptr.To("me")
	if _, _, _ = l.Get(context.Background()); inner.reads != 1 {
		t.Errorf("a Lease the watch shows held here: %d reads of the API server, want 1", inner.reads)
	}
}

// A version held elsewhere that the watch delivered a lease duration ago,
// with nothing written since, is shown released, so that a new elector
// takes it at once; a renewal since (another record) is shown as it is.
func TestWatchedLockShowsAnExpiredVersionReleased(t *testing.T) {
	renewed := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	watched := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dead"),
		LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &renewed, AcquireTime: &renewed}}
	lease := &WatchedLease{lookup: func() (*coordinationv1.Lease, bool) { return watched, true }}
	lease.saw(watched, "me", nil)
	inner := &memLock{id: "me", rec: resourcelock.LeaseSpecToLeaderElectionRecord(&watched.Spec)}
	raw := LeaseRecord(watched)
	inner.raw = raw
	l := &watchedLock{Interface: inner, lease: lease, mine: func() bool { return true }}

	if rec, _, err := l.Get(context.Background()); err != nil || rec.HolderIdentity != "dead" {
		t.Fatalf("a version delivered just now: holder %q (err %v), want dead", rec.HolderIdentity, err)
	}
	lease.mu.Lock()
	lease.expires = time.Now().Add(-time.Millisecond) // delivered a lease duration ago
	lease.mu.Unlock()
	rec, gotRaw, err := l.Get(context.Background())
	if err != nil || rec.HolderIdentity != "" || !bytes.Equal(gotRaw, raw) {
		t.Fatalf("an expired version: holder %q (err %v), want it shown released with its record", rec.HolderIdentity, err)
	}
	if inner.rec.HolderIdentity != "dead" {
		t.Fatalf("showing a version released changed the Lease")
	}
	// The API server has a renewal the watch has not delivered yet.
	inner.raw = append([]byte("renewed since "), raw...)
	if rec, _, _ := l.Get(context.Background()); rec.HolderIdentity != "dead" {
		t.Errorf("a renewal the watch has not delivered: holder %q, want dead", rec.HolderIdentity)
	}
	// Read from the watch (assigned elsewhere), the same.
	inner.raw = raw
	l.mine = func() bool { return false }
	if rec, _, _ := l.Get(context.Background()); rec.HolderIdentity != "" {
		t.Errorf("an expired version read from the watch: holder %q, want it shown released", rec.HolderIdentity)
	}
}
