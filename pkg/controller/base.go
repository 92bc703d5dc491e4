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

package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Base is what every controller of the manager shares: its name, its
// queue, the informers it waits for and how it runs. A controller embeds
// it, fills it in its constructor and gets Name, QueueLen and Run.
type Base struct {
	// ControllerName is the name used by --controllers, the queue and metrics.
	ControllerName string
	// Queue is the controller's named queue; event handlers add keys to it.
	Queue Queue
	// Synced are the HasSynced functions of the informers the controller reads.
	Synced []cache.InformerSynced
	// Workers is the number of keys reconciled at once.
	Workers int
	// Reconcile and GiveUp are the controller's; see Worker.
	Reconcile ReconcileFunc
	GiveUp    GiveUpFunc
	// MaxRetries bounds a key's consecutive failures; 0 is DefaultMaxRetries.
	MaxRetries int
	// Events, when set, is a generic-event source: the keys sent to it
	// (with TrySend) are reconciled like those of watch events.
	Events <-chan Key

	// handlers are the registrations made through Handle and Track; stops
	// what Track tied to the controller's life besides them.
	handlers []registration
	stops    []func()
}

type registration struct {
	informer cache.SharedInformer
	handle   cache.ResourceEventHandlerRegistration
}

// Handle registers handler on a shared informer for as long as the
// controller lives: Run removes it when it returns. A controller rebuilt on
// the same informers (per-controller mode, after losing its Lease) thus
// leaves no handler of its stopped self behind, feeding a dead queue.
func (b *Base) Handle(informer cache.SharedInformer, handler cache.ResourceEventHandler) error {
	handle, err := informer.AddEventHandler(handler)
	return b.remember(informer, handle, err)
}

// remember keeps a registration for Run to remove.
func (b *Base) remember(informer cache.SharedInformer, handle cache.ResourceEventHandlerRegistration, err error) error {
	if err != nil {
		return err
	}
	b.handlers = append(b.handlers, registration{informer: informer, handle: handle})
	return nil
}

// Tracked is a part of a controller that registers on shared informers or
// runs beside them, such as a Children adapter (its verdicts, its blocker
// watches).
type Tracked interface {
	track(b *Base) error
}

// Track ties parts to the controller's life, like Handle: they start now
// and stop when Run returns, so that a controller rebuilt on the same
// informers leaves nothing of its stopped self behind.
func (b *Base) Track(parts ...Tracked) error {
	for _, p := range parts {
		if err := p.track(b); err != nil {
			return err
		}
	}
	return nil
}

// handleWithoutResync is Handle for a handler that resyncs never concern.
func (b *Base) handleWithoutResync(informer cache.SharedInformer, handler cache.ResourceEventHandler) error {
	handle, err := informer.AddEventHandlerWithResyncPeriod(handler, 0)
	return b.remember(informer, handle, err)
}

// onStop runs stop when Run returns.
func (b *Base) onStop(stop func()) { b.stops = append(b.stops, stop) }

// removeHandlers undoes every Handle and Track.
func (b *Base) removeHandlers() {
	for _, r := range b.handlers {
		// Fails only for a handle of another informer, which Handle never makes.
		_ = r.informer.RemoveEventHandler(r.handle)
	}
	b.handlers = nil
	for _, stop := range b.stops {
		stop()
	}
	b.stops = nil
}

// NewBase returns the Base of a controller named name, with its queue of
// the given kind (empty: PriorityQueue).
func NewBase(name string, workers int, queue QueueKind) Base {
	return Base{ControllerName: name, Queue: newStandbyQueue(name, NewQueueOfKind(name, queue)), Workers: workers}
}

// Name implements the manager's Controller.
func (b *Base) Name() string { return b.ControllerName }

// HasSynced reports whether the informers the controller reads have synced.
func (b *Base) HasSynced() bool {
	for _, synced := range b.Synced {
		if !synced() {
			return false
		}
	}
	return true
}

// QueueLen reports the queue depth for /debug/controllers.
func (b *Base) QueueLen() int { return b.Queue.Len() }

// Run waits for the caches, then reconciles until ctx is done. A
// controller runs once: when Run returns its handlers are gone and its
// queue is shut down.
func (b *Base) Run(ctx context.Context) {
	defer b.removeHandlers()
	defer b.Queue.ShutDown()
	if q, ok := b.Queue.(*standbyQueue); ok {
		q.run() // it leads: the keys held meanwhile become its workqueue's
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, b.Synced...) {
		return
	}
	if b.Events != nil {
		go ForwardEvents(ctx, b.Events, b.Queue)
	}
	w := Worker{Name: b.ControllerName, Queue: b.Queue, Reconcile: b.Reconcile, OnGiveUp: b.GiveUp, MaxRetries: b.MaxRetries}
	w.Run(ctx, b.Workers)
}

// GiveUpEvent returns a GiveUpFunc that records a Warning event, reason
// ReconcileFailed, on the object get finds for the dropped key.
func GiveUpEvent(recorder record.EventRecorder, get func(Key) (runtime.Object, error), message string) GiveUpFunc {
	return func(_ context.Context, key Key, err error) {
		if obj, getErr := get(key); getErr == nil {
			recorder.Eventf(obj, corev1.EventTypeWarning, "ReconcileFailed", "%s: %v", message, err)
		}
	}
}

// WriteFailed records a failed write of a child (what, e.g. "Deployment
// shop/web") as a Warning event with reason on owner, unless the error is
// transient, and returns the error to retry with.
func WriteFailed(recorder record.EventRecorder, owner runtime.Object, reason, verb, what string, err error) error {
	if !IsTransient(err) {
		recorder.Eventf(owner, corev1.EventTypeWarning, reason, "Failed to %s %s: %v", verb, what, err)
	}
	return fmt.Errorf("%s %s: %w", verb, what, err)
}
