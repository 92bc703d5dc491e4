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
	controllers map[string]Controller
	// unsynced counts the informer factories started but not yet synced.
	unsynced int
}

func newManagerStatus(enabled []ControllerDescriptor) *managerStatus {
	s := &managerStatus{controllers: map[string]Controller{}}
	for _, d := range enabled {
		s.enabled = append(s.enabled, d.Name)
	}
	sort.Strings(s.enabled)
	return s
}

func (s *managerStatus) setControllers(cs []Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// synced reports whether every informer started so far has synced. An
// instance that started none (a standby) is ready.
func (s *managerStatus) synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsynced == 0
}

// ControllerStatus is one entry of /debug/controllers.
type ControllerStatus struct {
	Name       string `json:"name"`
	Running    bool   `json:"running"`
	QueueDepth *int   `json:"queueDepth,omitempty"`
}

// DebugStatus is what /debug/controllers serves; the tests and the
// benchmark decode it.
type DebugStatus struct {
	Leading     bool               `json:"leading"`
	Synced      bool               `json:"cachesSynced"`
	Controllers []ControllerStatus `json:"controllers"`
}

// QueuesEmpty reports whether at least one controller runs and every
// running one has an empty queue.
func (d DebugStatus) QueuesEmpty() bool {
	for _, c := range d.Controllers {
		if c.QueueDepth == nil || *c.QueueDepth != 0 {
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
			cs.Running = true
			if q, ok := c.(QueueLengther); ok {
				n := q.QueueLen()
				cs.QueueDepth = &n
			}
		}
		out.Controllers = append(out.Controllers, cs)
	}
	return out
}
