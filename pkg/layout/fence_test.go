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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/ndsl/controller-manager/pkg/membership"
)

// A replica leaving as the last of its layout hands its shards to the
// replicas of the next layout once they have them warm: every shard they
// offer stated warm by one of them, and each offering something.
func TestOthersWarm(t *testing.T) {
	now := time.Now()
	const mine, next = "4-shards.keys-v2", "2-shards.keys-v2"
	member := func(layout string, age time.Duration, offered, warm []string) *sighting {
		return &sighting{role: memberLease, layout: layout, changed: now.Add(-age), offered: offered, warm: warm, statesWarm: true}
	}
	shards := []string{"app-0-of-2", "app-1-of-2"}
	for _, tc := range []struct {
		name string
		seen map[string]*sighting
		want bool
	}{
		{"no replica of another layout", map[string]*sighting{"a": member(mine, 0, []string{"app-0-of-4"}, nil)}, true},
		{"its shards not built yet", map[string]*sighting{"b": member(next, 0, shards, nil)}, false},
		{"one of two shards warm", map[string]*sighting{"b": member(next, 0, shards, shards[:1])}, false},
		{"every shard warm", map[string]*sighting{"b": member(next, 0, shards, shards)}, true},
		{"warm between two replicas", map[string]*sighting{"b": member(next, 0, shards, shards[:1]), "c": member(next, 0, shards, shards[1:])}, true},
		{"a whole controller not synced yet", map[string]*sighting{"b": member("per-controller", 0, nil, nil)}, false},
		{"a whole controller synced", map[string]*sighting{"b": member("per-controller", 0, []string{"app"}, nil)}, true},
		{"a dead member of another layout", map[string]*sighting{"b": member(next, time.Minute, shards, nil)}, true},
		{"a version that states nothing warm", map[string]*sighting{"b": {role: memberLease, layout: next, changed: now, offered: shards}}, true},
	} {
		if got := othersWarm(tc.seen, mine, now, 15*time.Second); got != tc.want {
			t.Errorf("%s: othersWarm = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// OthersWarm's live read of the member Leases adds a successor the watch
// has not delivered yet, and does not set back one the watch delivered, a
// newer version than the read may return.
func TestOthersWarmReadsUnseenMembersLive(t *testing.T) {
	const mine, next = "4-shards.keys-v2", "2-shards.keys-v2"
	member := func(name, rv, warm string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", ResourceVersion: rv,
			Labels:      map[string]string{membership.GroupLabel: membership.GroupLabelValue("cm"), Label: next},
			Annotations: map[string]string{membership.UnitsAnnotation: "app-0-of-2,app-1-of-2", membership.WarmAnnotation: warm},
		}}
	}
	for _, tc := range []struct {
		name    string
		watched *coordinationv1.Lease // delivered by the watch before the read
		listed  *coordinationv1.Lease // what the read returns
		want    bool
	}{
		{"a successor the watch has not delivered, not warm yet", nil, member("b", "5", ""), false},
		{"a successor the watch delivered warm, read at an older version", member("b", "6", "app-0-of-2,app-1-of-2"), member("b", "5", ""), true},
	} {
		client := fake.NewClientset(tc.listed)
		informer := informers.NewSharedInformerFactory(client, 0).Coordination().V1().Leases().Informer()
		f, err := New(Config{Client: client, Namespace: "ns", Group: "cm", Layout: mine,
			Legacy: func(string) (string, bool) { return "", false }, Ours: func(string) bool { return false },
			LeaseDuration: 15 * time.Second, Clock: clock.RealClock{}}, informer)
		if err != nil {
			t.Fatal(err)
		}
		if tc.watched != nil {
			f.observe(tc.watched)
		}
		if got := f.OthersWarm(); got != tc.want {
			t.Errorf("%s: OthersWarm = %t, want %t", tc.name, got, tc.want)
		}
	}
}
