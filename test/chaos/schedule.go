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
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// faultKind is one kind of scheduled disturbance.
type faultKind int

const (
	killLeader       faultKind = iota // kill -9 of the leader; restarted like a kubelet would
	pauseLeader                       // SIGSTOP of the leader for longer than the lease, then SIGCONT
	restartAPIServer                  // kube-apiserver stopped and started again
	restartEtcd                       // etcd stopped and started again
	stealLease                        // the Lease written by hand to a holder that is no manager
	editChildren                      // conflicting manual edits of controller-owned children
	deleteChildren                    // controller-owned Deployments, Services, Ingresses deleted
	deleteClaims                      // Pipelines' PVCs deleted
	deleteNamespace                   // a namespace of Apps, or the Pipelines' namespace, deleted
	editOwners                        // spec edits of Apps and Pipelines, annotation toggles of Services
	deleteOwners                      // Apps, Pipelines and annotated Services deleted
	rollout                           // every replica replaced in turn (SIGTERM) while clients create Apps and read v1
	certFlags                         // a replica restarted with other certificate names (--webhook-cert-extra-names)
	skewClock                         // one replica's Lease stamps skewed by ±30 s from then on
	changeLayout                      // every replica rolled to the next Lease layout, then back, while clients create Apps and read v1
	numFaultKinds
)

var faultKindName = [numFaultKinds]string{
	"kill-leader", "pause-leader", "restart-apiserver", "restart-etcd", "steal-lease",
	"edit-children", "delete-children", "delete-claims", "delete-namespace", "edit-owners", "delete-owners",
	"rollout", "cert-flags", "skew-clock", "change-layout",
}

func (k faultKind) String() string { return faultKindName[k] }

func parseFaultKind(s string) (faultKind, bool) {
	i := slices.Index(faultKindName[:], s)
	return faultKind(i), i >= 0
}

func faultKindNames() []string { return faultKindName[:] }

// step is one scheduled disturbance: its kind, when it starts (from the
// start of the fault phase), and a random number that picks its targets
// among the candidates sorted by name when it runs.
type step struct {
	at   time.Duration
	kind faultKind
	pick uint64
}

func (s step) String() string {
	return fmt.Sprintf("+%-6s %-17s pick=%016x", s.at.Round(100*time.Millisecond), s.kind, s.pick)
}

// schedule is the seeded list of steps over duration: rounds in which every
// kind of kinds occurs once in a shuffled order, one step about every gap.
// The same seed gives the same schedule.
func schedule(seed uint64, duration, gap time.Duration, kinds []faultKind) []step {
	if len(kinds) == 0 {
		for k := range numFaultKinds {
			kinds = append(kinds, k)
		}
	}
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var steps []step
	for i := 0; ; i++ {
		round := slices.Clone(kinds)
		r.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		for _, k := range round {
			at := time.Duration(len(steps))*gap + time.Duration(r.Int64N(int64(gap/2)))
			if at >= duration && len(steps) >= len(kinds) {
				return steps
			}
			steps = append(steps, step{at: at, kind: k, pick: r.Uint64()})
		}
	}
}

// describeSchedule is the schedule, one step a line, for the output.
func describeSchedule(steps []step) string {
	var b strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&b, "  %3d %s\n", i, s)
	}
	return b.String()
}
