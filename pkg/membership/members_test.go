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

package membership

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func newTestMembers(t *testing.T, identity string, units ...string) (*Members, *clocktesting.FakeClock) {
	t.Helper()
	clock := clocktesting.NewFakeClock(time.Now())
	m := New(Config{Client: fake.NewClientset(), Namespace: "ns", Group: "cm", Identity: identity, Units: units,
		LeaseDuration: 15 * time.Second, JudgeInterval: 2 * time.Second, Clock: clock})
	if err := m.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.judge()
	return m, clock
}

// memberLease is another replica's member Lease, renewed with its own clock.
func memberLease(identity, rv string, renew time.Time, units string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName("cm", identity), Namespace: "ns", ResourceVersion: rv,
			Annotations: map[string]string{UnitsAnnotation: units}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(identity), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(renew))},
	}
}

// A member is live while its Lease changes, as this replica sees it, and
// gone a lease duration after the last change, whatever its renewTime says.
func TestMembersJudgeByChangeNotClock(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		m, clock := newTestMembers(t, "a", "w1", "w2")
		stamp := clock.Now().Add(skew) // b's clock, off by an hour, never moves
		m.observe(memberLease("b", "1", stamp, "w1,w2"))
		if got := m.Live(); len(got) != 2 {
			t.Fatalf("skew %s: live = %v, want a and b", skew, got)
		}
		// b renews (its resourceVersion changes) every 10 s for a minute.
		for i := 2; i < 8; i++ {
			clock.Step(10 * time.Second)
			m.observe(memberLease("b", string(rune('0'+i)), stamp, "w1,w2"))
			if err := m.renew(context.Background()); err != nil {
				t.Fatal(err)
			}
			m.judge()
			if got := m.Live(); len(got) != 2 {
				t.Fatalf("skew %s: b renewed 10 s ago, live = %v", skew, got)
			}
		}
		if m.Mine("w1") == m.Mine("w2") {
			t.Fatalf("skew %s: a owns w1 %v and w2 %v, want one each", skew, m.Mine("w1"), m.Mine("w2"))
		}
		// b stops renewing: gone once a lease duration passed on a's clock.
		clock.Step(14 * time.Second)
		if err := m.renew(context.Background()); err != nil {
			t.Fatal(err)
		}
		m.judge()
		if got := m.Live(); len(got) != 2 {
			t.Fatalf("skew %s: 14 s after b's last renewal, live = %v, want b still", skew, got)
		}
		clock.Step(2 * time.Second)
		m.judge()
		if got := m.Live(); len(got) != 1 || got[0] != "a" {
			t.Fatalf("skew %s: 16 s after b's last renewal, live = %v, want only a", skew, got)
		}
		if !m.Mine("w1") || !m.Mine("w2") {
			t.Fatalf("skew %s: b is gone, but a does not own both units", skew)
		}
	}
}

// A unit goes only to a member that runs it, and a subscriber hears of
// every change.
func TestMembersAssignWhatEachRuns(t *testing.T) {
	m, clock := newTestMembers(t, "a", "app", "ingress")
	changes, unsubscribe := m.Subscribe()
	defer unsubscribe()
	m.observe(memberLease("b", "1", clock.Now(), "app,ingress,pipeline"))
	select {
	case <-changes:
	default:
		t.Fatal("no change notified when b joined")
	}
	if got := m.Owner("pipeline"); got != "b" {
		t.Fatalf("pipeline assigned to %q, want b, the only member that runs it", got)
	}
	if m.Owner("app") == m.Owner("ingress") {
		t.Fatalf("app and ingress both assigned to %s", m.Owner("app"))
	}
	m.forget(memberLease("b", "1", clock.Now(), ""))
	if got := m.Owner("pipeline"); got != "" {
		t.Fatalf("pipeline assigned to %q after b left, want no one", got)
	}
}

// A replica that leaves deletes its member Lease and owns nothing after.
func TestMembersLeave(t *testing.T) {
	m, _ := newTestMembers(t, "a", "w1")
	ctx := context.Background()
	leases := m.cfg.Client.CoordinationV1().Leases("ns")
	lease, err := leases.Get(ctx, LeaseName("cm", "a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Labels[GroupLabel] != "cm" || lease.Annotations[UnitsAnnotation] != "w1" || ptr.Deref(lease.Spec.HolderIdentity, "") != "a" {
		t.Fatalf("member Lease = %+v", lease)
	}
	if !m.Mine("w1") {
		t.Fatal("a alone does not own w1")
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, lease.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("member Lease after Leave: %v, want not found", err)
	}
	if m.Mine("w1") {
		t.Fatal("a still owns w1 after it left")
	}
	if err := m.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, lease.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a renewal after Leave wrote the member Lease again: %v", err)
	}
}

// A subscription that ends gets no more changes and costs nothing after:
// one is taken per term of leading a controller.
func TestMembersUnsubscribe(t *testing.T) {
	m, clock := newTestMembers(t, "a", "w1", "w2")
	for range 100 {
		_, unsubscribe := m.Subscribe()
		unsubscribe()
	}
	kept, unsubscribe := m.Subscribe()
	defer unsubscribe()
	if n := len(m.changes.subs); n != 1 {
		t.Fatalf("%d subscribers after 100 ended and 1 kept, want 1", n)
	}
	m.observe(memberLease("b", "1", clock.Now(), "w1,w2"))
	select {
	case <-kept:
	default:
		t.Fatal("the kept subscription missed b joining")
	}
}

// Each member keeps the units whose Leases it states it holds, while every
// live member states them; with a member of an earlier version, which does
// not, the assignment is Assign's, as that member computes it.
func TestMembersKeepWhatTheyHoldOnlyWhenAllSayWhat(t *testing.T) {
	units := []string{"w1", "w2", "w3", "w4"}
	plain := Assign(units, []string{"a", "b"})
	var aHolds, bHolds []string // the opposite of Assign's split
	for _, u := range units {
		if plain[u] == "a" {
			bHolds = append(bHolds, u)
		} else {
			aHolds = append(aHolds, u)
		}
	}
	for _, bStates := range []bool{true, false} {
		m, _ := newTestMembers(t, "a", units...)
		for _, u := range aHolds {
			m.SetHolding(u, true)
		}
		if _, err := m.renewIfDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		b := memberLease("b", "1", time.Now(), "w1,w2,w3,w4")
		if bStates {
			b.Annotations[HoldingAnnotation] = strings.Join(bHolds, ",")
		}
		m.observe(b)
		for _, u := range units {
			want := plain[u] == "a"
			if bStates {
				want = slices.Contains(aHolds, u)
			}
			if m.Mine(u) != want {
				t.Errorf("b states its holdings %v: a owns %s = %v, want %v", bStates, u, m.Mine(u), want)
			}
		}
	}
}

// A unit offered later (once its caches synced) is stated by the member
// Lease at the next renewal and assigned from there, as the others see it;
// until then it goes only to the members that offer it.
func TestMembersOfferLater(t *testing.T) {
	m, clock := newTestMembers(t, "a")
	m.observe(memberLease("b", "1", clock.Now(), "app"))
	if got := m.Owner("app"); got != "b" {
		t.Fatalf("app assigned to %q before a offers it, want b", got)
	}
	m.Offer("app")
	m.Offer("pipeline")
	m.judge()
	if got := m.Owner("pipeline"); got != "" {
		t.Fatalf("pipeline assigned to %q before a's member Lease states it", got)
	}
	if _, err := m.renewIfDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.judge()
	lease, err := m.cfg.Client.CoordinationV1().Leases("ns").Get(context.Background(), LeaseName("cm", "a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[UnitsAnnotation]; got != "app,pipeline" {
		t.Fatalf("a's member Lease offers %q, want app,pipeline (renewed at once when the offer changed)", got)
	}
	if got := m.Owner("pipeline"); got != "a" {
		t.Fatalf("pipeline assigned to %q, want a, the only member that offers it", got)
	}
	if got := m.Owner("app"); got == "" {
		t.Fatal("app is assigned to nobody, though both offer it")
	}
}

// A holder hands a unit over once its assignee states it warm, at once to
// an assignee of an earlier version (which states nothing warm), and a
// change of what a member states warm wakes the subscribers.
func TestReadyWhenTheAssigneeIsWarm(t *testing.T) {
	m, _ := newTestMembers(t, "a", "w1", "w2")
	changes, unsubscribe := m.Subscribe()
	defer unsubscribe()
	b := memberLease("b", "1", time.Now(), "w1,w2")
	b.Annotations[WarmAnnotation] = ""
	m.observe(b)
	<-changes // b joined: the assignment changed
	var theirs string
	for _, u := range []string{"w1", "w2"} {
		if !m.Mine(u) {
			theirs = u
		}
	}
	if theirs == "" {
		t.Fatal("b was assigned nothing")
	}
	if m.Ready(theirs) {
		t.Fatalf("%s is ready on b, which states nothing warm", theirs)
	}
	b = b.DeepCopy()
	b.ResourceVersion, b.Annotations[WarmAnnotation] = "2", theirs
	m.observe(b)
	select {
	case <-changes:
	default:
		t.Error("b stating a unit warm woke no subscriber")
	}
	if !m.Ready(theirs) {
		t.Errorf("%s is not ready on b, which states it warm", theirs)
	}
	old := memberLease("b", "3", time.Now(), "w1,w2") // no warm annotation: an earlier version
	m.observe(old)
	if !m.Ready(theirs) {
		t.Errorf("%s is not ready on b, of a version that builds a unit when it takes it", theirs)
	}
	m.SetWarm("w9", true)
	if err := m.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := m.written.Annotations[WarmAnnotation]; got != "w9" {
		t.Errorf("the member Lease states %q warm, want w9", got)
	}
}

// The member Lease of a replica killed without leaving is deleted once it
// has not changed for a lease duration, so that a replica that starts, of
// this layout or another, does not count it live for another one from its
// first sight of it; one that changed meanwhile stays.
func TestMembersCollectADeadMemberAfterALeaseDuration(t *testing.T) {
	m, clock := newTestMembers(t, "a", "w1")
	leases := m.cfg.Client.CoordinationV1().Leases("ns")
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, id := range []string{"dead", "renewing"} {
		l, err := leases.Create(context.Background(), memberLease(id, "", clock.Now(), "w1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m.observe(l)
		_ = store.Add(l)
	}
	clock.Step(14 * time.Second)
	m.collect(context.Background(), store)
	if got, _ := leases.List(context.Background(), metav1.ListOptions{}); len(got.Items) != 3 {
		t.Fatalf("%d member Leases 14 s after the others' last renewal, want all 3", len(got.Items))
	}
	renewed, err := leases.Get(context.Background(), LeaseName("cm", "renewing"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renewed.Spec.RenewTime = ptr.To(metav1.NewMicroTime(clock.Now()))
	renewed.ResourceVersion = "2" // the fake clientset keeps what it is given
	if renewed, err = leases.Update(context.Background(), renewed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.observe(renewed)
	_ = store.Update(renewed)
	clock.Step(time.Second)
	m.collect(context.Background(), store)
	if _, err := leases.Get(context.Background(), LeaseName("cm", "dead"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a member Lease unchanged for a lease duration: %v, want it deleted", err)
	}
	if _, err := leases.Get(context.Background(), LeaseName("cm", "renewing"), metav1.GetOptions{}); err != nil {
		t.Errorf("a member Lease renewed a second ago: %v, want it kept", err)
	}
}

// A replica of another Lease layout (its member Lease states another value
// of one of the Labels) is no member here: it must never be assigned a
// unit, which its fence would keep it from taking while this layout leads.
// One that states none (a version before layouts) still is.
func TestMembersOfAnotherLayoutAreNotMembers(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	m := New(Config{Client: fake.NewClientset(), Namespace: "ns", Group: "cm", Identity: "a", Units: []string{"whole"},
		LeaseDuration: 15 * time.Second, JudgeInterval: 2 * time.Second, Clock: clock, Labels: map[string]string{"layout": "one"}})
	if err := m.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.judge()
	other := memberLease("b", "1", clock.Now(), "whole")
	other.Labels = map[string]string{"layout": "two"}
	m.observe(other)
	if got := m.Live(); len(got) != 1 || !m.Mine("whole") {
		t.Fatalf("with a replica of another layout: live %v, whole assigned to %q; want a alone", got, m.Owner("whole"))
	}
	same := memberLease("c", "1", clock.Now(), "whole")
	same.Labels = map[string]string{"layout": "one"}
	m.observe(same)
	legacy := memberLease("d", "1", clock.Now(), "whole")
	m.observe(legacy)
	if got := m.Live(); len(got) != 3 {
		t.Fatalf("with a replica of this layout and one of a version before layouts: live %v, want a, c and d", got)
	}
	// b's replica restarted with this layout's flags would be another
	// identity; a Lease that changes layout is dropped all the same.
	same.Labels["layout"], same.ResourceVersion = "two", "2"
	m.observe(same)
	if got := m.Live(); len(got) != 2 {
		t.Fatalf("after c's Lease stated another layout: live %v, want a and d", got)
	}
}
