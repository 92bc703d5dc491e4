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
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/ha"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/pkg/membership"
)

// controllerSet is controllers built, with the informers they read
// started: everything a replica runs before it may write. A warm standby
// holds one while it waits for the Lease; a cold one builds it once it
// leads. It is the ha.Set the HA layer drives.
type controllerSet struct {
	m        *Manager
	logger   klog.Logger
	cc       ControllerContext
	guardFor func(unit string) *leaseguard.Guard
	// descriptors are the units', each named after its unit.
	descriptors map[string]ControllerDescriptor
	stop        func()

	mu sync.Mutex
	// controllers are the latest build of each unit, by name.
	controllers map[string]Controller
	// events start each controller's Event sink, once.
	events map[string]func()
	// broadcasters are each controller's Event broadcaster: the one of its
	// latest build.
	broadcasters map[string]record.EventBroadcaster
}

// haControllers is the Manager as the HA layer sees it: it builds sets of
// units and records what this replica leads.
type haControllers struct{ m *Manager }

func (h haControllers) Start(ctx context.Context, units []ha.Unit, guardFor func(unit string) *leaseguard.Guard) (ha.Set, error) {
	set, err := h.m.startSet(ctx, units, guardFor)
	if err != nil {
		return nil, err // not a nil *controllerSet in a non-nil ha.Set
	}
	return set, nil
}

func (h haControllers) SetLeading(units []string, leading bool) {
	h.m.status.setLeading(units, leading)
}
func (h haControllers) SetLease(unit, lease string)                 { h.m.status.setLease(unit, lease) }
func (h haControllers) SetMembers(m *membership.Members, id string) { h.m.status.setMembers(m, id) }

// startSet builds the units (registering their informers and event
// handlers) and starts the informers they read, which run until stop. The
// event handlers fill the controllers' queues; nothing takes keys from them
// until Run. Nothing here writes to the API server: a controller's Event
// sink starts with its workers.
//
// Whole units share informers of the whole cluster; a shard unit, started
// alone, gets informers of its own range (pkg/shardclient). guardFor gives
// the lease guard of a unit's clients and Event sink (nil: none).
func (m *Manager) startSet(ctx context.Context, units []ha.Unit, guardFor func(unit string) *leaseguard.Guard) (*controllerSet, error) {
	set := &controllerSet{m: m, logger: klog.FromContext(ctx), guardFor: guardFor, descriptors: map[string]ControllerDescriptor{},
		controllers: map[string]Controller{}, events: map[string]func(){}, broadcasters: map[string]record.EventBroadcaster{}}
	var shardUnit *ha.Unit
	for _, u := range units {
		d := m.descriptor(u.Controller)
		d.Name = u.Name
		set.descriptors[u.Name] = d
		if u.Shard != nil {
			shardUnit = &u
		}
	}
	if shardUnit != nil && len(units) > 1 {
		return nil, fmt.Errorf("a shard unit (%s) is started alone", shardUnit.Name)
	}
	cc, err := m.controllerContext(shardUnit)
	if err != nil {
		return nil, err
	}
	set.cc = cc
	var built []Controller
	for _, u := range units {
		c, err := set.build(ctx, set.descriptors[u.Name])
		if err != nil {
			set.shutdownEvents()
			return nil, err
		}
		set.controllers[u.Name] = c
		built = append(built, c)
	}

	// Every informer a controller needs has now been requested: start them.
	// They outlive a drain (the reconciles in flight read from them) and
	// stop with stop, whose Shutdown waits for them. They count as
	// unsynced until they sync or the set stops.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	cc.factories.Start(informerCtx.Done())
	m.status.startedInformers(1)
	var once sync.Once
	uncounted := func() { once.Do(func() { m.status.addUnsynced(-1) }) }
	go func() {
		if cc.factories.WaitForCacheSync(informerCtx.Done()) {
			uncounted()
		}
	}()
	m.status.addBuilt(built)
	var following sync.WaitGroup
	for _, c := range built {
		following.Go(func() { m.status.followSync(informerCtx, c) })
	}
	set.stop = func() {
		stopInformers()
		following.Wait()
		m.status.dropBuilt(built)
		cc.factories.Shutdown()
		uncounted()
		set.shutdownEvents()
	}
	return set, nil
}

// descriptor is the enabled controller called name.
func (m *Manager) descriptor(name string) ControllerDescriptor {
	for _, d := range m.enabled {
		if d.Name == name {
			return d
		}
	}
	panic(fmt.Sprintf("controller %s is not enabled", name)) // the units come from m.enabled
}

// Run runs the named units' workers (see ha.Set).
func (s *controllerSet) Run(ctx context.Context, drain <-chan struct{}, units []string) {
	s.mu.Lock()
	controllers := make([]Controller, 0, len(units))
	for _, name := range units {
		controllers = append(controllers, s.controllers[name])
	}
	s.mu.Unlock()
	s.m.runControllers(ctx, drain, s, controllers)
}

// Rebuild builds a unit again on the running informers.
func (s *controllerSet) Rebuild(ctx context.Context, unit string) error {
	c, err := s.build(ctx, s.descriptors[unit])
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.controllers[unit] = c
	s.mu.Unlock()
	s.m.status.setRunning([]Controller{c}, false)
	return nil
}

// Synced says whether the informers the unit reads have synced; a
// controller that cannot tell is synced once built.
func (s *controllerSet) Synced(unit string) bool {
	s.mu.Lock()
	c := s.controllers[unit]
	s.mu.Unlock()
	if cs, ok := c.(CacheSyncer); ok {
		return cs.HasSynced()
	}
	return true
}

// Stop stops the informers and the Event sinks.
func (s *controllerSet) Stop() { s.stop() }

// build builds one controller with its own clients and Event recorder,
// both behind its lease guard.
func (s *controllerSet) build(ctx context.Context, d ControllerDescriptor) (Controller, error) {
	cc := s.cc
	if s.guardFor != nil {
		cc.guard = s.guardFor(d.Name)
	}
	eventClient, err := cc.KubeClient("events")
	if err != nil {
		return nil, err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	s.mu.Lock()
	// A rebuild (per-controller mode, after a lost Lease) replaces a
	// stopped controller, whose Events are no longer recorded.
	if old, ok := s.broadcasters[d.Name]; ok {
		old.Shutdown()
	}
	s.broadcasters[d.Name] = broadcaster
	s.mu.Unlock()
	cc.recorders = func(component string) record.EventRecorder {
		return broadcaster.NewRecorder(Scheme, corev1.EventSource{Component: component})
	}
	var once sync.Once
	start := func() {
		once.Do(func() {
			broadcaster.StartStructuredLogging(3)
			broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventClient.CoreV1().Events("")})
		})
	}
	c, err := d.New(klog.NewContext(ctx, klog.LoggerWithName(s.logger, d.Name)), cc)
	if err != nil {
		return nil, fmt.Errorf("building controller %s: %w", d.Name, err)
	}
	// A rebuild (per-controller mode) finds its factories started.
	cc.factories.StartNew()
	s.mu.Lock()
	s.events[d.Name] = start
	s.mu.Unlock()
	return c, nil
}

// startEvents starts the Event sink of each controller.
func (s *controllerSet) startEvents(controllers []Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range controllers {
		if start, ok := s.events[c.Name()]; ok {
			start()
		}
	}
}

func (s *controllerSet) shutdownEvents() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, b := range s.broadcasters {
		b.Shutdown()
		delete(s.broadcasters, name)
	}
}
