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

// TestJudgeWrites: the verdicts on writes against a Lease history with a
// renewal, an expiry and a takeover, and a theft.
func TestJudgeWrites(t *testing.T) {
	a, b := slotUser(0), slotUser(1)
	ms := func(n int) time.Time {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Millisecond)
	}
	l := newLeaseTimeline([]auditEvent{
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
	})
	for _, tc := range []struct {
		name string
		user string
		at   time.Time
		want leaseVerdict
	}{
		{"before any acquisition", b, ms(500), notHeld},
		{"right after acquiring", a, ms(10), held},
		{"within the lease of the last renewal", a, ms(6900), held},
		{"past the lease of the last renewal", a, ms(7100), notHeld},
		{"the new holder", b, ms(8100), held},
		{"the old holder after the takeover", a, ms(8100), notHeld},
		{"in flight after the theft, not yet read", b, ms(9200), inFlightAfterTheft},
		// The answer may not have reached b yet: a write its guard let
		// through before may still arrive.
		{"after the read was answered", b, ms(9600), inFlightAfterTheft},
		{"after the next Lease request", b, ms(10600), notHeld},
	} {
		if got, why := l.judge(tc.user, tc.at); got != tc.want {
			t.Errorf("%s: verdict %d (%s), want %d", tc.name, got, why, tc.want)
		}
	}
	if got := l.holderChanges(); got != 3 {
		t.Errorf("holder changes = %d, want 3 (a, b, the thief)", got)
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
