package app

import (
	"sort"
	"sync"
	"sync/atomic"
)

// managerStatus is what the HTTP endpoints report: which controllers are
// enabled, whether this instance leads, and whether its caches have synced.
type managerStatus struct {
	enabled []string
	leading atomic.Bool

	mu          sync.Mutex
	controllers map[string]Controller // built: their queues fill
	running     bool                  // their workers run
	// unsynced counts the informer factories started but not yet synced.
	unsynced int
	// awaitingInformers is set while an instance that starts informers
	// before it leads (a warm standby, or no leader election) has not
	// started them yet, so it is not ready in the meantime.
	awaitingInformers bool
}

func newManagerStatus(enabled []ControllerDescriptor) *managerStatus {
	s := &managerStatus{controllers: map[string]Controller{}}
	for _, d := range enabled {
		s.enabled = append(s.enabled, d.Name)
	}
	sort.Strings(s.enabled)
	return s
}

// setControllers records the controllers built (a warm standby's too) and
// whether their workers run.
func (s *managerStatus) setControllers(cs []Controller, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = running
	s.controllers = map[string]Controller{}
	for _, c := range cs {
		s.controllers[c.Name()] = c
	}
}

func (s *managerStatus) addUnsynced(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsynced += n
}

// startedInformers records n informer factories started and not yet synced.
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
	Name    string `json:"name"`
	Running bool   `json:"running"`
	// QueueDepth is reported once the controller is built: on a warm
	// standby it counts the keys waiting for the Lease.
	QueueDepth *int `json:"queueDepth,omitempty"`
}

// DebugStatus is what /debug/controllers serves; the tests and the
// benchmark decode it.
type DebugStatus struct {
	Leading     bool               `json:"leading"`
	Synced      bool               `json:"cachesSynced"`
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
	out := DebugStatus{Leading: s.leading.Load(), Synced: s.synced()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.enabled {
		cs := ControllerStatus{Name: name}
		if c, ok := s.controllers[name]; ok {
			cs.Running = s.running
			if q, ok := c.(QueueLengther); ok {
				n := q.QueueLen()
				cs.QueueDepth = &n
			}
		}
		out.Controllers = append(out.Controllers, cs)
	}
	return out
}
