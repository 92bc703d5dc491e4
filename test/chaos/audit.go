package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// auditPolicy logs what the invariants need and little else: every request
// on the managers' Lease (reads too: they say when a process saw the Lease
// pass to someone else), and every write by the managers' ServiceAccounts.
// Events and the reviews of delegated authentication are left out.
var auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
  - group: "authentication.k8s.io"
  - group: "authorization.k8s.io"
- level: Metadata
  namespaces: ["` + framework.ManagerNamespace + `"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
    resourceNames: ["` + framework.LeaseName + `"]
- level: Metadata
  userGroups: ["system:serviceaccounts:` + framework.ManagerNamespace + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditEvent is the part of an audit.k8s.io/v1 Event the suite reads.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived metav1.MicroTime `json:"requestReceivedTimestamp"`
	StageTimestamp  metav1.MicroTime `json:"stageTimestamp"`
}

func (e *auditEvent) received() time.Time  { return e.RequestReceived.Time }
func (e *auditEvent) completed() time.Time { return e.StageTimestamp.Time }
func (e *auditEvent) ok() bool {
	return e.ResponseStatus != nil && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}
func (e *auditEvent) key() objectKey {
	if e.ObjectRef == nil {
		return objectKey{}
	}
	return objectKey{e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name}
}
func (e *auditEvent) isLease() bool {
	return e.ObjectRef != nil && e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == framework.LeaseName &&
		e.ObjectRef.Namespace == framework.ManagerNamespace
}
func (e *auditEvent) isWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (e *auditEvent) String() string {
	code := 0
	if e.ResponseStatus != nil {
		code = e.ResponseStatus.Code
	}
	sub := ""
	if e.ObjectRef != nil && e.ObjectRef.Subresource != "" {
		sub = "/" + e.ObjectRef.Subresource
	}
	return fmt.Sprintf("%s %s %s%s by %s -> %d", e.received().UTC().Format("15:04:05.000000"), e.Verb, e.key(), sub, e.User.Username, code)
}

// readAudit reads the completed requests of the audit log, in the order
// the API server received them.
func readAudit(path string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("decoding an audit event: %w", err)
		}
		if e.Stage == "ResponseComplete" || e.Stage == "Panic" {
			events = append(events, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].received().Before(events[j].received()) })
	return events, nil
}

// leaseTimeline is what the audit log says about the Lease: every
// successful write of it (an acquisition or renewal by its writer, or a
// theft) and every read, per user.
type leaseTimeline struct {
	writes   []*auditEvent            // successful creates and updates, by completion
	reads    map[string][]*auditEvent // gets per user, by receipt
	requests map[string][]*auditEvent // every request on the Lease per user, by receipt
}

func newLeaseTimeline(events []auditEvent) *leaseTimeline {
	l := &leaseTimeline{reads: map[string][]*auditEvent{}, requests: map[string][]*auditEvent{}}
	for i := range events {
		e := &events[i]
		if !e.isLease() {
			continue
		}
		l.requests[e.User.Username] = append(l.requests[e.User.Username], e)
		switch {
		case e.Verb == "get":
			l.reads[e.User.Username] = append(l.reads[e.User.Username], e)
		case (e.Verb == "update" || e.Verb == "create") && e.ok():
			l.writes = append(l.writes, e)
		}
	}
	sort.SliceStable(l.writes, func(i, j int) bool { return l.writes[i].completed().Before(l.writes[j].completed()) })
	return l
}

// holderChanges counts the successful Lease writes whose writer differs
// from the previous one's: acquisitions (and thefts).
func (l *leaseTimeline) holderChanges() int {
	n, last := 0, ""
	for _, w := range l.writes {
		if w.User.Username != last {
			n++
			last = w.User.Username
		}
	}
	return n
}

// leaseVerdict says whether a write by user, received at t, was made while
// user held the Lease.
type leaseVerdict int

const (
	held leaseVerdict = iota
	// inFlightAfterTheft: someone else wrote the Lease before the write
	// arrived, within the lease of user's last renewal, and user had not
	// read the Lease since: only a stolen Lease allows it, and nothing
	// short of fencing tokens could prevent it.
	inFlightAfterTheft
	notHeld
)

// judge classifies a write by user received at t, and says why when the
// user did not hold the Lease.
func (l *leaseTimeline) judge(user string, t time.Time) (leaseVerdict, string) {
	// The user's last successful acquisition or renewal answered before t.
	var last *auditEvent
	for _, w := range l.writes {
		if !w.completed().Before(t) {
			break
		}
		if w.User.Username == user {
			last = w
		}
	}
	if last == nil {
		return notHeld, "it had never acquired the Lease"
	}
	if age := t.Sub(last.received()); age > leaseDuration {
		return notHeld, fmt.Sprintf("its last renewal was received %v earlier, past the %v lease", age.Round(time.Millisecond), leaseDuration)
	}
	// Did anyone else write the Lease after that renewal and before t?
	i := slices.IndexFunc(l.writes, func(w *auditEvent) bool {
		return w.User.Username != user && w.completed().After(last.completed()) && w.completed().Before(t)
	})
	if i < 0 {
		return held, ""
	}
	other := l.writes[i]
	for _, r := range l.reads[user] {
		if !r.received().After(other.completed()) {
			continue
		}
		// The audit log says when the API server answered the read, not
		// when the process got the answer (which is when its lease guard
		// acts), and a write the guard let through just before may arrive
		// after. The process's next request on the Lease is sent by the
		// election loop after it has handled the answer: writes received
		// after that one are the process's own doing.
		if next := l.nextRequest(user, r); next != nil && next.received().Before(t) {
			return notHeld, fmt.Sprintf("%s wrote the Lease at %s; it read the Lease at %s and sent its next Lease request at %s",
				other.User.Username, other.completed().UTC().Format("15:04:05.000"), r.received().UTC().Format("15:04:05.000"),
				next.received().UTC().Format("15:04:05.000"))
		}
		break
	}
	return inFlightAfterTheft, ""
}

// nextRequest is user's first request on the Lease received after r was
// answered, or nil.
func (l *leaseTimeline) nextRequest(user string, r *auditEvent) *auditEvent {
	for _, e := range l.requests[user] {
		if e.received().After(r.completed()) {
			return e
		}
	}
	return nil
}
