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

package chaos

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// leaseEvent is an audit event on the managers' Lease, received at ms and
// answered 5 ms later.
func leaseEvent(user, verb string, ms int, code int) auditEvent {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := auditEvent{Stage: "ResponseComplete", Verb: verb,
		RequestReceived: metav1.NewMicroTime(base.Add(time.Duration(ms) * time.Millisecond)),
		StageTimestamp:  metav1.NewMicroTime(base.Add(time.Duration(ms+5) * time.Millisecond))}
	e.User.Username = user
	e.ObjectRef = &struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	}{Resource: "leases", Namespace: framework.ManagerNamespace, Name: framework.LeaseName, APIGroup: "coordination.k8s.io"}
	e.ResponseStatus = &struct {
		Code int `json:"code"`
	}{Code: code}
	return e
}

// withHolder gives a Lease write the body the audit policy logs: the
// holder it names, "" for a release.
func withHolder(e auditEvent, holder string) auditEvent {
	e.RequestObject = &struct {
		Spec struct {
			HolderIdentity *string `json:"holderIdentity"`
		} `json:"spec"`
	}{}
	if holder != "" {
		e.RequestObject.Spec.HolderIdentity = &holder
	}
	return e
}

// TestJudgeWrites: the verdicts on writes against a Lease history with a
// renewal, an expiry and a takeover, a theft, and a release.
func TestJudgeWrites(t *testing.T) {
	a, b, c := slotUser(0), slotUser(1), slotUser(2)
	ms := func(n int) time.Time {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Millisecond)
	}
	l := leaseTimelines([]auditEvent{
		leaseEvent(a, "create", 0, 201),
		leaseEvent(a, "update", 1000, 200),
		leaseEvent(b, "update", 1500, 409), // a failed attempt changes nothing
		// a stops renewing; b takes over after the lease.
		leaseEvent(b, "update", 8000, 200),
		// The Lease is stolen from b at 9 s; b reads it at 9.5 s and
		// tries again at 10.5 s.
		leaseEvent("admin", "update", 9000, 200),
		leaseEvent(b, "get", 9500, 200),
		leaseEvent(b, "get", 10500, 200),
		// c takes it after the thief's lease, and it is stolen at 20.5 s;
		// c does not read it again.
		leaseEvent(c, "update", 20000, 200),
		leaseEvent("admin", "update", 20500, 200),
	})[framework.LeaseName]
	released := leaseTimelines([]auditEvent{
		withHolder(leaseEvent(a, "create", 0, 201), "a"),
		withHolder(leaseEvent(a, "update", 1000, 200), ""),
	})[framework.LeaseName]
	for _, tc := range []struct {
		name  string
		lease *leaseTimeline
		user  string
		at    time.Time
		want  leaseVerdict
	}{
		{"before any acquisition", l, b, ms(500), notHeld},
		{"right after acquiring", l, a, ms(10), held},
		{"within the renew deadline of the last renewal", l, a, ms(4900), held},
		// The lease guard stops writes at the renew deadline; the lease
		// duration is when others may take over.
		{"past the renew deadline, within the lease", l, a, ms(5100), notHeld},
		{"past the lease of the last renewal", l, a, ms(7100), notHeld},
		{"the new holder", l, b, ms(8100), held},
		{"the old holder after the takeover", l, a, ms(8100), notHeld},
		{"in flight after the theft, not yet read", l, b, ms(9200), inFlightAfterTheft},
		// The answer may not have reached b yet: a write its guard let
		// through before may still arrive.
		{"after the read was answered", l, b, ms(9600), inFlightAfterTheft},
		{"after the next Lease request", l, b, ms(10600), notHeld},
		{"within the retry period of a theft", l, c, ms(21400), inFlightAfterTheft},
		// c's election loop reads the Lease within a retry period, and its
		// guard stops writes then.
		{"past the retry period of a theft", l, c, ms(21600), lateAfterTheft},
		{"before the release", released, a, ms(900), held},
		{"after the release", released, a, ms(1100), notHeld},
	} {
		if got, why := tc.lease.judge(tc.user, tc.at); got != tc.want {
			t.Errorf("%s: verdict %d (%s), want %d", tc.name, got, why, tc.want)
		}
	}
	if got := l.holderChanges(); got != 5 {
		t.Errorf("holder changes = %d, want 5 (a, b, the thief, c, the thief)", got)
	}
}

// TestLiveTakeovers: a manager taking a Lease whose last write (not a
// release) is less than the lease duration old is double leadership.
func TestLiveTakeovers(t *testing.T) {
	a, b := slotUser(0), slotUser(1)
	for _, tc := range []struct {
		name   string
		events []auditEvent
		want   int
	}{
		{"after the lease", []auditEvent{
			withHolder(leaseEvent(a, "update", 0, 200), "a"),
			withHolder(leaseEvent(b, "update", 6100, 200), "b")}, 0},
		{"after a release", []auditEvent{
			withHolder(leaseEvent(a, "update", 0, 200), "a"),
			withHolder(leaseEvent(a, "update", 50, 200), ""),
			withHolder(leaseEvent(b, "update", 100, 200), "b")}, 0},
		{"a renewed Lease taken", []auditEvent{
			withHolder(leaseEvent(a, "update", 0, 200), "a"),
			withHolder(leaseEvent(a, "update", 1000, 200), "a"),
			withHolder(leaseEvent(b, "update", 3000, 200), "b")}, 1},
		{"a thief's live Lease taken", []auditEvent{
			withHolder(leaseEvent("admin", "update", 0, 200), thief),
			withHolder(leaseEvent(b, "update", 5000, 200), "b")}, 1},
		{"a thief taking a live Lease is the fault, not double leadership", []auditEvent{
			withHolder(leaseEvent(a, "update", 0, 200), "a"),
			withHolder(leaseEvent("admin", "update", 100, 200), thief)}, 0},
		{"a failed attempt", []auditEvent{
			withHolder(leaseEvent(a, "update", 0, 200), "a"),
			withHolder(leaseEvent(b, "update", 100, 409), "b")}, 0},
	} {
		var got []string
		for _, l := range leaseTimelines(tc.events) {
			got = append(got, l.liveTakeovers()...)
		}
		if len(got) != tc.want {
			t.Errorf("%s: %d takeovers of a live Lease %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
}

// TestCoveringLease: each client's writes belong to its own Lease.
func TestCoveringLease(t *testing.T) {
	const base = "chaos-cm/v0.0.0 (linux/amd64) kubernetes/$Format/controller-manager/"
	for _, tc := range []struct {
		client        string
		perController bool
		want          string
	}{
		{"app", false, framework.LeaseName},
		{"app", true, framework.LeaseName + "-app"},
		{"cleanup", true, framework.LeaseName + "-cleanup"},
		{"app-1", true, framework.LeaseName + "-app-1"},
		{"pipeline-12", true, framework.LeaseName + "-pipeline-12"},
		{"app-x", true, ""},
		{"app-1", false, ""},
		{"webhook-certificates", false, framework.LeaseName + "-certs"},
		{"webhook-certificates", true, framework.LeaseName + "-certs"},
		{"webhooks", false, ""},
		{"leader-election", true, ""},
	} {
		e := auditEvent{UserAgent: base + tc.client}
		if got := coveringLease(&e, tc.perController); got != tc.want {
			t.Errorf("client %s, per-controller %t: %q, want %q", tc.client, tc.perController, got, tc.want)
		}
	}
	if got := coveringLease(&auditEvent{UserAgent: "kubectl/v1.36.3"}, false); got != "" {
		t.Errorf("kubectl: %q, want none", got)
	}
}

func TestUserSlot(t *testing.T) {
	for slot := range 3 {
		if got := userSlot(slotUser(slot)); got != slot {
			t.Errorf("userSlot(%q) = %d, want %d", slotUser(slot), got, slot)
		}
	}
	if got := userSlot("admin"); got != -1 {
		t.Errorf("userSlot(admin) = %d, want -1", got)
	}
}
