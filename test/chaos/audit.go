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
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// auditPolicy logs what the invariants need and little else: every request
// on the managers' Leases (reads too: they say when a process saw a Lease
// pass to someone else), with the body of each write (the holder it names:
// a release names none), and every write by the managers' ServiceAccounts.
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
- level: Request
  namespaces: ["` + framework.ManagerNamespace + `"]
  verbs: ["create", "update"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: Metadata
  namespaces: ["` + framework.ManagerNamespace + `"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
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
	// RequestObject is logged for Lease writes only.
	RequestObject *struct {
		Spec struct {
			HolderIdentity *string `json:"holderIdentity"`
		} `json:"spec"`
	} `json:"requestObject"`
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

// isLease: a request on one of the managers' Leases (every Lease in their
// namespace: the single one, one per controller, the certificates').
func (e *auditEvent) isLease() bool {
	return e.ObjectRef != nil && e.ObjectRef.Resource == "leases" && e.ObjectRef.Namespace == framework.ManagerNamespace
}

// holder is the holder identity a Lease write names; "" for a release,
// and for a holder in parentheses: a Lease layout's tombstone of another
// layout's Lease (pkg/layout), which nobody leads under.
// Without the body (an audit policy that logged none), the writer.
func (e *auditEvent) holder() string {
	if e.RequestObject == nil {
		return e.User.Username
	}
	if h := e.RequestObject.Spec.HolderIdentity; h != nil && !strings.HasPrefix(*h, "(") {
		return *h
	}
	return ""
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

// coveringLeases names the Leases under one of which a manager's write
// must be made, from the client that sent it (its user agent ends in
// controller-manager/<client>): the certificates' Lease for the certificate
// writer; for a controller, the single Lease or its own, as the writer's
// Lease layout has it (a change-layout step changes it); for a shard unit,
// its shard's Lease; none for a client that holds no Lease and must write
// nothing.
func coveringLeases(e *auditEvent) []string {
	const prefix = "controller-manager/"
	i := strings.LastIndex(e.UserAgent, prefix)
	if i < 0 {
		return nil
	}
	switch client := e.UserAgent[i+len(prefix):]; {
	case client == "webhook-certificates":
		return []string{certsLease}
	case slices.Contains(controllerNames, client):
		return []string{framework.LeaseName, framework.LeaseName + "-" + client}
	case isShardUnit(client):
		return []string{framework.LeaseName + "-" + client} // <controller>-<i>-of-<n>: its shard's Lease
	}
	return nil
}

// unitLease is what a Lease's name says of the unit it covers.
type unitLease struct {
	// controller is the controller it covers; "" for the single Lease,
	// which covers them all.
	controller string
	// index and count are its shard's, count 0 for a whole controller.
	index, count int
}

// parseUnitLease reads a Lease name of the managers' group: the single
// Lease, <group>-<controller> or <group>-<controller>-<i>-of-<n>; ok is
// false for any other (the certificates', members', the layout fence).
func parseUnitLease(name string) (unitLease, bool) {
	if name == framework.LeaseName {
		return unitLease{}, true
	}
	rest, ok := strings.CutPrefix(name, framework.LeaseName+"-")
	if !ok {
		return unitLease{}, false
	}
	if slices.Contains(controllerNames, rest) {
		return unitLease{controller: rest}, true
	}
	return parseShardUnit(rest)
}

// layoutOf names the Lease layout a unit Lease belongs to.
func (u unitLease) layoutOf() string {
	switch {
	case u.controller == "":
		return "single"
	case u.count == 0:
		return "per-controller" // also a shard layout's whole controllers: one Lease either way
	}
	return fmt.Sprintf("%d shards", u.count)
}

// covers says whether u's unit would write the object of e written by a
// unit of controller: the single Lease and a whole controller's every
// object; a shard only its range's, by namespace for the App and Ingress
// controllers. A Pipeline's children are placed by their Pipeline's uid,
// which the audit log does not carry: every shard covers them.
func (u unitLease) covers(controller string, e *auditEvent) bool {
	switch {
	case u.controller == "":
		return true
	case u.controller != controller:
		return false
	case u.count == 0:
		return true
	}
	return !namespaceSharded(controller) || inShard(u, e.ObjectRef.Namespace)
}

// namespaceSharded says whether controller's objects are placed in shards
// by their namespace.
func namespaceSharded(controller string) bool {
	return controller == appcontroller.ControllerName || controller == ingress.ControllerName
}

// inShard says whether namespace ns is in u's shard.
func inShard(u unitLease, ns string) bool {
	s, err := shard.New(u.index, u.count)
	return err == nil && s.ContainsNamespace(ns)
}

// outsideShard says why a write by a shard unit of the App or Ingress
// controller is to an object outside its range, or "".
func outsideShard(lease string, e *auditEvent) string {
	u, ok := parseUnitLease(lease)
	if !ok || u.count == 0 || !namespaceSharded(u.controller) || inShard(u, e.ObjectRef.Namespace) {
		return ""
	}
	return fmt.Sprintf("namespace %q is not in shard %d of %d", e.ObjectRef.Namespace, u.index, u.count)
}

// otherLayoutLeading names a Lease of another layout than own's, covering
// the object e writes, that a manager held when e was received: its last
// write before named a manager and completed less than the lease duration
// before (a killed holder's successor waits that long; a release names
// no one, nor does a fence's tombstone).
func otherLayoutLeading(leases map[string]*leaseTimeline, own string, e *auditEvent) string {
	ownUnit, ok := parseUnitLease(own)
	if !ok {
		return ""
	}
	controller := ownUnit.controller
	if controller == "" { // the single Lease: the controller is the client's
		controller = e.UserAgent[strings.LastIndex(e.UserAgent, "/")+1:]
	}
	t := e.received()
	var names []string
	for name := range leases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		u, ok := parseUnitLease(name)
		if !ok || u.layoutOf() == ownUnit.layoutOf() || !u.covers(controller, e) {
			continue
		}
		var last *auditEvent
		for _, w := range leases[name].writes {
			if !w.completed().Before(t) {
				break
			}
			last = w
		}
		if last == nil || userSlot(last.User.Username) < 0 || last.holder() == "" {
			continue
		}
		if age := t.Sub(last.completed()); age < leaseDuration {
			return fmt.Sprintf("Lease %s (%s) was written for %s by %s %v before", name, u.layoutOf(), last.holder(), last.User.Username, age.Round(time.Millisecond))
		}
	}
	return ""
}

// isShardUnit says whether client names a shard unit, <controller>-<i>-of-<n>.
func isShardUnit(client string) bool {
	_, ok := parseShardUnit(client)
	return ok
}

// parseShardUnit reads a shard unit's name, <controller>-<i>-of-<n>.
func parseShardUnit(client string) (unitLease, bool) {
	rest, n, ok := strings.Cut(client, "-of-")
	j := strings.LastIndex(rest, "-")
	if !ok || j < 0 || !slices.Contains(controllerNames, rest[:j]) {
		return unitLease{}, false
	}
	i, err := strconv.Atoi(rest[j+1:])
	count, errN := strconv.Atoi(n)
	return unitLease{controller: rest[:j], index: i, count: count}, err == nil && errN == nil
}

// certsLease is the Lease of the one writer of the webhook certificates.
const certsLease = framework.LeaseName + "-certs"

// controllerNames are the manager's controllers, as their clients' user
// agents and their per-controller Leases name them.
var controllerNames = app.NewRegistry().Names()

// leaseTimeline is what the audit log says about one Lease: every
// successful write of it (an acquisition, renewal or release by a manager,
// or a theft) and every read, per user.
type leaseTimeline struct {
	name     string
	writes   []*auditEvent            // successful creates and updates, by completion
	reads    map[string][]*auditEvent // gets per user, by receipt
	requests map[string][]*auditEvent // every request on the Lease per user, by receipt
}

// leaseTimelines are the timelines of every Lease of the managers, by name.
func leaseTimelines(events []auditEvent) map[string]*leaseTimeline {
	out := map[string]*leaseTimeline{}
	for i := range events {
		e := &events[i]
		if !e.isLease() {
			continue
		}
		l := out[e.ObjectRef.Name]
		if l == nil {
			l = &leaseTimeline{name: e.ObjectRef.Name, reads: map[string][]*auditEvent{}, requests: map[string][]*auditEvent{}}
			out[e.ObjectRef.Name] = l
		}
		l.requests[e.User.Username] = append(l.requests[e.User.Username], e)
		switch {
		case e.Verb == "get":
			l.reads[e.User.Username] = append(l.reads[e.User.Username], e)
		case (e.Verb == "update" || e.Verb == "create") && e.ok():
			l.writes = append(l.writes, e)
		}
	}
	for _, l := range out {
		sort.SliceStable(l.writes, func(i, j int) bool { return l.writes[i].completed().Before(l.writes[j].completed()) })
	}
	return out
}

// holderChanges counts the successful Lease writes naming a holder other
// than the last one named: acquisitions (and thefts); releases aside.
func (l *leaseTimeline) holderChanges() int {
	n, last := 0, ""
	for _, w := range l.writes {
		if h := w.holder(); h != "" && h != last {
			n++
			last = h
		}
	}
	return n
}

// liveTakeovers are the acquisitions of a live Lease, that is double
// leadership: a manager's write naming itself holder when the write before
// named another holder (not a release) and completed less than the lease
// duration before this one was received. A replica may take a Lease only
// after seeing it unchanged for the lease duration on its own clock, counted
// from a read that came after that write: so on the API server's clock no
// later writer can come sooner, whatever the replicas' wall clocks say.
func (l *leaseTimeline) liveTakeovers() []string {
	var out []string
	var prev *auditEvent
	for _, w := range l.writes {
		if h := w.holder(); prev != nil && h != "" && userSlot(w.User.Username) >= 0 && prev.holder() != "" && prev.holder() != h {
			if gap := w.received().Sub(prev.completed()); gap < leaseDuration {
				out = append(out, fmt.Sprintf("Lease %s: %s took it for %s %v after %s wrote it for %s (lease %v)", l.name, w.User.Username, h,
					gap.Round(time.Millisecond), prev.User.Username, prev.holder(), leaseDuration))
			}
		}
		prev = w
	}
	return out
}

// leaseVerdict says whether a write by user, received at t, was made while
// user held the Lease.
type leaseVerdict int

const (
	held leaseVerdict = iota
	// inFlightAfterTheft: someone else wrote the Lease before the write
	// arrived, within the renew deadline of user's last renewal and within
	// the retry period of that theft, and user had not read the Lease
	// since: only a stolen Lease allows it, and nothing short of fencing
	// tokens could prevent it.
	inFlightAfterTheft
	// lateAfterTheft: as inFlightAfterTheft, but past the retry period:
	// user's election loop reads the Lease every retry period, and its lease
	// guard stops writes as soon as a read names another holder.
	lateAfterTheft
	// pastDeadline: received past the renew deadline of user's last
	// renewal, but within its lease duration, and nobody else wrote the
	// Lease since: no one else could lead yet. A write that succeeded so
	// is a violation all the same (the guard promises the renew deadline);
	// one that failed is the guard's cancellation of a write in flight that
	// a loaded or restarting API server read only after the deadline (it
	// answers 504: the client was gone).
	pastDeadline
	notHeld
)

// judge classifies a write by user received at t, and says why when the
// user did not hold the Lease.
func (l *leaseTimeline) judge(user string, t time.Time) (leaseVerdict, string) {
	// The user's last successful acquisition or renewal answered before t,
	// unless it released the Lease after it.
	var last *auditEvent
	for _, w := range l.writes {
		if !w.completed().Before(t) {
			break
		}
		if w.User.Username == user {
			last = w
		}
	}
	switch {
	case last == nil:
		return notHeld, fmt.Sprintf("it had never acquired Lease %s", l.name)
	case last.holder() == "":
		return notHeld, fmt.Sprintf("it had released Lease %s at %s", l.name, last.completed().UTC().Format("15:04:05.000"))
	}
	// The lease guard lets a write leave only within the renew deadline of
	// the last renewal's sending, which is before the API server received it.
	if age := t.Sub(last.received()); age > renewDeadline {
		why := fmt.Sprintf("its last renewal of Lease %s was received %v earlier, past the %v renew deadline", l.name,
			age.Round(time.Millisecond), renewDeadline)
		since := slices.ContainsFunc(l.writes, func(w *auditEvent) bool {
			return w.User.Username != user && w.completed().After(last.completed()) && w.completed().Before(t)
		})
		if age < leaseDuration && !since {
			return pastDeadline, why
		}
		return notHeld, why
	}
	// Did anyone else write the Lease after that renewal and before t?
	i := slices.IndexFunc(l.writes, func(w *auditEvent) bool {
		return w.User.Username != user && w.completed().After(last.completed()) && w.completed().Before(t)
	})
	if i < 0 {
		return held, ""
	}
	other := l.writes[i]
	var firstRead *auditEvent
	for _, r := range l.reads[user] {
		if !r.received().After(other.completed()) {
			continue
		}
		firstRead = r
		// The audit log says when the API server answered the read, not
		// when the process got the answer (which is when its lease guard
		// acts), and a write the guard let through just before may arrive
		// after. The process's next request on the Lease is sent by the
		// election loop after it has handled the answer: writes received
		// after that one are the process's own doing.
		if next := l.nextRequest(user, r); next != nil && next.received().Before(t) {
			return notHeld, fmt.Sprintf("%s wrote Lease %s at %s; it read the Lease at %s and sent its next Lease request at %s",
				other.User.Username, l.name, other.completed().UTC().Format("15:04:05.000"), r.received().UTC().Format("15:04:05.000"),
				next.received().UTC().Format("15:04:05.000"))
		}
		break
	}
	// The election loop reads the Lease within a retry period of the theft;
	// the API server's time to answer that read is added, as it is when the
	// guard learns of the theft, and so is deliverySlack.
	bound := retryPeriod + deliverySlack
	if firstRead != nil {
		bound += firstRead.completed().Sub(firstRead.received())
	}
	if late := t.Sub(other.completed()); late > bound {
		return lateAfterTheft, fmt.Sprintf("%s wrote Lease %s at %s, %v before, past the %v retry period (and the read's answer)",
			other.User.Username, l.name, other.completed().UTC().Format("15:04:05.000"), late.Round(time.Millisecond), bound.Round(time.Millisecond))
	}
	return inFlightAfterTheft, ""
}

// deliverySlack is how late, past the retry period and the read's answer,
// a write the guard let through may still be received: the answer travels
// to the process and is handled there before the guard acts, and a write
// sent just before travels to the API server and waits for its handler.
// Neither shows in the audit log, and on a loaded 2-core machine the two
// took up to 39 ms (two make test runs failed at 18 and 39 ms past a bound
// without it). A guard that ignored the read is still caught: its writes
// come after the next Lease request too.
const deliverySlack = 250 * time.Millisecond

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

// lastWrite is when user's last successful write of the Lease before t
// completed; zero if none.
func (l *leaseTimeline) lastWrite(user string, t time.Time) time.Time {
	var last time.Time
	for _, w := range l.writes {
		if !w.completed().Before(t) {
			break
		}
		if w.User.Username == user {
			last = w.completed()
		}
	}
	return last
}
