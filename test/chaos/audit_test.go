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
	"fmt"
	"slices"
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
	// The Lease is stolen from a at 1 s; a's election loop reads it at the
	// end of the retry period.
	lateRead := leaseTimelines([]auditEvent{
		leaseEvent(a, "create", 0, 201),
		leaseEvent("admin", "update", 1000, 200),
		leaseEvent(a, "get", 1995, 200),
		leaseEvent(a, "update", 3000, 409),
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
		{"past the renew deadline, within the lease", l, a, ms(5100), pastDeadline},
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
		{"past the retry period of a theft", l, c, ms(21800), lateAfterTheft},
		// The answer reaches the process, and a write it let through
		// reaches the API server, some time after the audit log's stamps.
		{"just after a late read was answered", lateRead, a, ms(2050), inFlightAfterTheft},
		{"well after a late read was answered", lateRead, a, ms(2300), lateAfterTheft},
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

// TestCoveringLeases: each client's writes belong to one of its Leases.
func TestCoveringLeases(t *testing.T) {
	const base = "chaos-cm/v0.0.0 (linux/amd64) kubernetes/$Format/controller-manager/"
	for _, tc := range []struct {
		client string
		want   []string
	}{
		{"app", []string{framework.LeaseName, framework.LeaseName + "-app"}},
		{"cleanup", []string{framework.LeaseName, framework.LeaseName + "-cleanup"}},
		{"app-1-of-2", []string{framework.LeaseName + "-app-1-of-2"}},
		{"pipeline-12-of-16", []string{framework.LeaseName + "-pipeline-12-of-16"}},
		{"app-x", nil},
		{"app-1", nil},
		{"app-1-of-x", nil},
		{"webhook-certificates", []string{framework.LeaseName + "-certs"}},
		{"webhooks", nil},
		{"leader-election", nil},
	} {
		e := auditEvent{UserAgent: base + tc.client}
		if got := coveringLeases(&e); !slices.Equal(got, tc.want) {
			t.Errorf("client %s: %q, want %q", tc.client, got, tc.want)
		}
	}
	if got := coveringLeases(&auditEvent{UserAgent: "kubectl/v1.36.3"}); got != nil {
		t.Errorf("kubectl: %q, want none", got)
	}
}

// A write under one layout's Lease while a Lease of another layout that
// covers the object is held by a manager is two layouts leading; a shard's
// write outside its range is caught too.
func TestLayoutsJudgedByRange(t *testing.T) {
	at := func(s float64) metav1.MicroTime {
		return metav1.NewMicroTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second))))
	}
	leaseWrite := func(name, user, holder string, s float64) auditEvent {
		e := auditEvent{Stage: "ResponseComplete", Verb: "update", RequestReceived: at(s), StageTimestamp: at(s)}
		e.User.Username = user
		e.ObjectRef = &struct {
			Resource    string `json:"resource"`
			Namespace   string `json:"namespace"`
			Name        string `json:"name"`
			APIGroup    string `json:"apiGroup"`
			Subresource string `json:"subresource"`
		}{Resource: "leases", Namespace: framework.ManagerNamespace, Name: name}
		e.ResponseStatus = &struct {
			Code int `json:"code"`
		}{200}
		e.RequestObject = &struct {
			Spec struct {
				HolderIdentity *string `json:"holderIdentity"`
			} `json:"spec"`
		}{}
		e.RequestObject.Spec.HolderIdentity = &holder
		return e
	}
	// Two namespaces, one in each shard of 2.
	var in [2]string
	for i := 0; in[0] == "" || in[1] == ""; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		if inShard(unitLease{controller: "app", index: 0, count: 2}, ns) {
			in[0] = ns
		} else {
			in[1] = ns
		}
	}
	write := func(client, ns string, s float64) *auditEvent {
		e := &auditEvent{UserAgent: "x/controller-manager/" + client, RequestReceived: at(s), StageTimestamp: at(s)}
		e.ObjectRef = &struct {
			Resource    string `json:"resource"`
			Namespace   string `json:"namespace"`
			Name        string `json:"name"`
			APIGroup    string `json:"apiGroup"`
			Subresource string `json:"subresource"`
		}{Resource: "deployments", Namespace: ns, Name: "d"}
		return e
	}
	a, b := slotUser(0), slotUser(1)
	leases := leaseTimelines([]auditEvent{
		leaseWrite(framework.LeaseName+"-app", a, "a", 0),
		leaseWrite(framework.LeaseName+"-app-1-of-2", b, "b", 1),
		leaseWrite(framework.LeaseName+"-app", a, "", 2), // released
		leaseWrite(framework.LeaseName+"-app-0-of-2", b, "(fenced: layout x leads)", 0),
	})
	own := framework.LeaseName + "-app"
	if got := otherLayoutLeading(leases, own, write("app", in[1], 1.5)); got == "" {
		t.Error("a per-controller write in shard 1 of 2 while that shard's Lease was held: not caught")
	}
	if got := otherLayoutLeading(leases, own, write("app", in[0], 1.5)); got != "" {
		t.Errorf("a per-controller write in shard 0 of 2, whose Lease is a tombstone: %s", got)
	}
	if got := otherLayoutLeading(leases, framework.LeaseName+"-app-1-of-2", write("app-1-of-2", in[1], 3)); got != "" {
		t.Errorf("a shard's write after the per-controller Lease was released: %s", got)
	}
	if got := otherLayoutLeading(leases, framework.LeaseName+"-app-1-of-2", write("app-1-of-2", in[1], 1.5)); got == "" {
		t.Error("a shard's write while the per-controller Lease was held: not caught")
	}
	if got := otherLayoutLeading(leases, framework.LeaseName+"-ingress", write("ingress", in[1], 1.5)); got != "" {
		t.Errorf("another controller's Leases: %s", got)
	}
	if got := otherLayoutLeading(leases, framework.LeaseName+"-app-1-of-2", write("app-1-of-2", in[1], 1+leaseDuration.Seconds()+3)); got != "" {
		t.Errorf("long after: %s", got)
	}
	// A tombstone is no hold: its writer does not lead under it, and the
	// replica that takes the Lease from it takes no live Lease.
	tomb := leaseTimelines([]auditEvent{
		leaseWrite(framework.LeaseName, a, "(fenced: layout per-controller leads)", 0),
		leaseWrite(framework.LeaseName, b, "b", 1),
	})[framework.LeaseName]
	if v, _ := tomb.judge(a, at(0.5).Time); v != notHeld {
		t.Errorf("a write under a tombstone its writer wrote: verdict %v, want not held", v)
	}
	if got := tomb.liveTakeovers(); len(got) > 0 {
		t.Errorf("taking a tombstoned Lease: %v", got)
	}
	if outsideShard(framework.LeaseName+"-app-1-of-2", write("app-1-of-2", in[0], 1)) == "" {
		t.Error("shard 1's write in shard 0's namespace: not caught")
	}
	if why := outsideShard(framework.LeaseName+"-app-1-of-2", write("app-1-of-2", in[1], 1)); why != "" {
		t.Errorf("shard 1's write in its own namespace: %s", why)
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
