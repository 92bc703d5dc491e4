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
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/membership"
)

// managerStatus is what the HTTP endpoints report: which controllers are
// enabled, built and running, which Leases this instance holds, and whether
// its caches have synced.
type managerStatus struct {
	enabled []string

	mu       sync.Mutex
	built    map[string]Controller // their queues fill
	running  map[string]bool       // their workers run
	leading  map[string]bool       // this instance holds the Lease they run under
	leaseFor map[string]string     // the Lease each runs under, in per-controller mode
	// members shares the controllers among the replicas, in per-controller mode.
	members  *membership.Members
	identity string
	// cachesSynced: the informers each built controller reads have synced.
	cachesSynced map[string]bool
	// unsynced counts the sets of informers started but not yet synced.
	unsynced int
	// awaitingInformers is set while an instance that starts informers
	// before it leads (a warm standby, or no leader election) has not
	// started them yet, so it is not ready in the meantime.
	awaitingInformers bool
}

func newManagerStatus(enabled []string) *managerStatus {
	s := &managerStatus{enabled: slices.Sorted(slices.Values(enabled)), built: map[string]Controller{}, running: map[string]bool{},
		leading: map[string]bool{}, cachesSynced: map[string]bool{}}
	return s
}

// addBuilt records the controllers built (a warm standby's too), and
// dropBuilt that they are gone.
func (s *managerStatus) addBuilt(cs []Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.built[c.Name()] = c
	}
}

func (s *managerStatus) dropBuilt(cs []Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.built, c.Name()) // and any rebuild of it
		if s.cachesSynced[c.Name()] {
			delete(s.cachesSynced, c.Name())
			controller.SetCachesSynced(c.Name(), false)
		}
	}
}

// followSync records, and exports as a metric, when the caches controller c
// reads have synced: those it names (CacheSyncer), or else every informer
// started. In per-controller mode the replica then offers c to the others
// (setMembers). It gives up when ctx is done.
func (s *managerStatus) followSync(ctx context.Context, c Controller) {
	synced := s.synced
	if cs, ok := c.(CacheSyncer); ok {
		synced = cs.HasSynced
	}
	controller.SetCachesSynced(c.Name(), false)
	if wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return synced(), nil
	}) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cachesSynced[c.Name()] = true
	controller.SetCachesSynced(c.Name(), true)
	if s.members != nil {
		s.members.Offer(c.Name())
	}
}

// setRunning records whether the workers of cs run; a controller rebuilt
// after it lost its Lease replaces the old one.
func (s *managerStatus) setRunning(cs []Controller, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.running[c.Name()] = running
		s.built[c.Name()] = c
	}
}

// setLeading records whether this instance leads the named controllers: it
// holds their Lease and runs them. It is cleared once they have stopped,
// before the Lease is released, not after the release returns: another
// replica may have taken the Lease by then.
func (s *managerStatus) setLeading(names []string, leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		s.leading[name] = leading
	}
}

func (s *managerStatus) setLease(controller, lease string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leaseFor == nil {
		s.leaseFor = map[string]string{}
	}
	s.leaseFor[controller] = lease
}

// setMembers records the membership of per-controller mode, and offers it
// the controllers whose caches have synced so far (followSync offers the
// others as theirs do).
func (s *managerStatus) setMembers(members *membership.Members, identity string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members, s.identity = members, identity
	for name := range s.cachesSynced {
		members.Offer(name)
	}
}

func (s *managerStatus) addUnsynced(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsynced += n
}

// startedInformers records n sets of informers started and not yet synced.
func (s *managerStatus) startedInformers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsynced += n
	s.awaitingInformers = false
}

// synced reports whether every informer started so far has synced. An
// instance that started none (a cold standby) is ready; a warm standby is
// once its caches have synced.
func (s *managerStatus) synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsynced == 0 && !s.awaitingInformers
}

// ControllerStatus is one entry of /debug/controllers.
type ControllerStatus struct {
	Name string `json:"name"`
	// Lease is the controller's own Lease in per-controller mode.
	Lease string `json:"lease,omitempty"`
	// AssignedTo is the replica membership assigns the controller to, in
	// per-controller mode ("" while none is live).
	AssignedTo string `json:"assignedTo,omitempty"`
	// Leading: this instance holds the Lease the controller runs under.
	Leading bool `json:"leading"`
	Running bool `json:"running"`
	// CachesSynced: the informers the controller reads have synced here.
	CachesSynced bool `json:"cachesSynced"`
	// QueueDepth is reported once the controller is built: on a warm
	// standby it counts the keys waiting for the Lease.
	QueueDepth *int `json:"queueDepth,omitempty"`
}

// DebugStatus is what /debug/controllers serves; the tests and the
// benchmark decode it.
type DebugStatus struct {
	// Leading: this instance holds a Lease (in per-controller mode, at
	// least one; see each controller's).
	Leading bool `json:"leading"`
	Synced  bool `json:"cachesSynced"`
	// Identity is this instance's in its Leases, and Members the live
	// replicas it shares the controllers with (itself included), in
	// per-controller mode.
	Identity    string             `json:"identity,omitempty"`
	Members     []string           `json:"members,omitempty"`
	Controllers []ControllerStatus `json:"controllers"`
}

// QueuesEmpty reports whether at least one controller is enabled and every
// one runs with an empty queue.
func (d DebugStatus) QueuesEmpty() bool {
	for _, c := range d.Controllers {
		if !c.Running || c.QueueDepth == nil || *c.QueueDepth != 0 {
			return false
		}
	}
	return len(d.Controllers) > 0
}

func (s *managerStatus) debug() DebugStatus {
	out := DebugStatus{Synced: s.synced()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.members != nil {
		out.Identity, out.Members = s.identity, s.members.Live()
	}
	for _, name := range s.enabled {
		cs := ControllerStatus{Name: name, Lease: s.leaseFor[name], Leading: s.leading[name], Running: s.running[name],
			CachesSynced: s.cachesSynced[name]}
		if s.members != nil {
			cs.AssignedTo = s.members.Owner(name)
		}
		out.Leading = out.Leading || cs.Leading
		if c, ok := s.built[name]; ok {
			if q, ok := c.(QueueLengther); ok {
				n := q.QueueLen()
				cs.QueueDepth = &n
			}
		}
		out.Controllers = append(out.Controllers, cs)
	}
	return out
}
