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

	"github.com/ndsl/controller-manager/pkg/leaseguard"
)

// controllerSet is the enabled controllers, built, with the shared informers
// they read started: everything a replica runs before it may write. A warm
// standby holds one while it waits for the Lease; a cold one builds it once
// it leads.
type controllerSet struct {
	m           *Manager
	logger      klog.Logger
	cc          ControllerContext
	guardFor    func(controller string) *leaseguard.Guard
	controllers []Controller
	// events start each controller's Event sink, once.
	events map[string]func()
	stop   func()

	mu sync.Mutex
	// broadcasters are each controller's Event broadcaster: the one of its
	// latest build.
	broadcasters map[string]record.EventBroadcaster
}

// startControllers builds every enabled controller (registering its
// informers and event handlers) and starts the shared informers, which run
// until stop. The event handlers fill the controllers' queues; nothing takes
// keys from them until the controllers run. Nothing here writes to the API
// server: a controller's Event sink starts with its workers.
//
// guardFor gives the lease guard of a controller's clients and Event sink
// (nil: none): the one guard of the single Lease, or the controller's own.
func (m *Manager) startControllers(ctx context.Context, guardFor func(controller string) *leaseguard.Guard) (*controllerSet, error) {
	return m.startSet(ctx, nil, m.enabled, guardFor)
}

// startSet builds the controllers ds on the informer factories of u (nil:
// the shared ones, unscoped) and starts the informers.
func (m *Manager) startSet(ctx context.Context, u *unit, ds []ControllerDescriptor, guardFor func(controller string) *leaseguard.Guard) (*controllerSet, error) {
	cc, factories, err := m.controllerContext(u)
	if err != nil {
		return nil, err
	}
	set := &controllerSet{m: m, logger: klog.FromContext(ctx), cc: cc, guardFor: guardFor,
		events: map[string]func(){}, broadcasters: map[string]record.EventBroadcaster{}}
	for _, d := range ds {
		c, err := set.build(ctx, d)
		if err != nil {
			set.shutdownEvents()
			return nil, err
		}
		set.controllers = append(set.controllers, c)
	}

	// Every informer a controller needs has now been requested: start them.
	// They outlive a drain (the reconciles in flight read from them) and
	// stop with stop, whose factory Shutdown waits for them.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	for _, f := range cc.filtered.started(informerCtx.Done()) {
		factories = append(factories, kubeFactoryOf(f))
	}
	for _, f := range factories {
		f.start(informerCtx.Done())
	}
	m.status.startedInformers(len(factories))
	// Each factory counts as unsynced until it syncs or the set stops.
	uncounted := make([]func(), len(factories))
	for i, f := range factories {
		var once sync.Once
		uncounted[i] = func() { once.Do(func() { m.status.addUnsynced(-1) }) }
		go func() {
			if f.waitForSync(informerCtx.Done()) {
				uncounted[i]()
			}
		}()
	}
	m.status.addBuilt(set.controllers)
	var following sync.WaitGroup
	for _, c := range set.controllers {
		following.Go(func() { m.status.followSync(informerCtx, c) })
	}
	set.stop = func() {
		stopInformers()
		following.Wait()
		m.status.dropBuilt(set.controllers)
		for _, f := range factories {
			f.shutdown()
		}
		for _, done := range uncounted {
			done()
		}
		set.shutdownEvents()
	}
	return set, nil
}

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
	cc.filtered.startNew()
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
