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
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseStore is a resourcelock.Interface over one in-memory record, whose
// holder renews it with its own (skewed) clock.
type leaseStore struct {
	identity string
	mu       sync.Mutex
	rec      *resourcelock.LeaderElectionRecord
	writes   []resourcelock.LeaderElectionRecord
}

func (s *leaseStore) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := *s.rec
	raw, err := json.Marshal(rec)
	return &rec, raw, err
}

func (s *leaseStore) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return s.Update(ctx, ler)
}

func (s *leaseStore) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec = &ler
	s.writes = append(s.writes, ler)
	return nil
}

func (s *leaseStore) set(ler resourcelock.LeaderElectionRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec = &ler
}

func (s *leaseStore) RecordEvent(string) {}
func (s *leaseStore) Identity() string   { return s.identity }
func (s *leaseStore) Describe() string   { return "test/lease" }

// TestSpreadNeverTrustsTheHolderClock: a replica that waits its turn for a
// released Lease must not overwrite it when another replica takes it
// meanwhile, however far behind that replica's clock stamps renewTime.
func TestSpreadNeverTrustsTheHolderClock(t *testing.T) {
	for _, skew := range []time.Duration{-30 * time.Second, 30 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			store := &leaseStore{identity: "a", rec: &resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 15}}
			s := newSpread(5 * time.Millisecond)
			s.held = 1 // this replica holds another Lease: it waits its turn
			sl := s.lock(store)

			// The elector reads the Lease: released, so it tries for it.
			if _, _, err := sl.Get(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Meanwhile replica b, whose clock is off by skew, takes it.
			bNow := metav1.NewTime(time.Now().Add(skew))
			store.set(resourcelock.LeaderElectionRecord{HolderIdentity: "b", LeaseDurationSeconds: 15,
				AcquireTime: bNow, RenewTime: bNow, LeaderTransitions: 1})

			now := metav1.NewTime(time.Now())
			err := sl.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "a",
				LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now, LeaderTransitions: 1})
			if len(store.writes) > 0 {
				t.Fatalf("replica a overwrote b's live Lease (b's clock off by %s): wrote %+v", skew, store.writes)
			}
			if !errors.Is(err, errTakenMeanwhile) {
				t.Fatalf("Update = %v, want errTakenMeanwhile", err)
			}
		})
	}
}

// TestSpreadAcquiresAnUnchangedLease: a Lease that did not change while the
// replica waited its turn is acquired: the elector judged it expired by its
// own observation, whatever renewTime says.
func TestSpreadAcquiresAnUnchangedLease(t *testing.T) {
	future := metav1.NewTime(time.Now().Add(time.Hour)) // the old holder's clock was far ahead
	store := &leaseStore{identity: "a", rec: &resourcelock.LeaderElectionRecord{HolderIdentity: "b",
		LeaseDurationSeconds: 15, AcquireTime: future, RenewTime: future}}
	s := newSpread(5 * time.Millisecond)
	s.held = 1
	sl := s.lock(store)
	if _, _, err := sl.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now())
	if err := sl.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "a",
		LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now, LeaderTransitions: 1}); err != nil {
		t.Fatalf("Update = %v, want the expired Lease acquired", err)
	}
	if len(store.writes) != 1 || store.writes[0].HolderIdentity != "a" {
		t.Fatalf("writes = %+v, want one naming a", store.writes)
	}
}
