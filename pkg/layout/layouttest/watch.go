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

// Package layouttest follows a group's Leases in tests and records every
// moment at which unit Leases of two Lease layouts were held at once.
package layouttest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/membership"
)

// Watch is a running watch of a group's unit Leases.
type Watch struct {
	group  string
	legacy func(string) (string, bool)
	stop   context.CancelFunc

	mu       sync.Mutex
	held     map[string]string // held unit Lease → its layout
	overlaps []string
	// released is, by layout, when a Lease of it was last seen released;
	// releasedLease the same by Lease; acquired, by Lease, when it was
	// first seen held.
	released      map[string]time.Time
	releasedLease map[string]time.Time
	acquired      map[string]time.Time
}

// Start follows the Leases of group in namespace until Stop or the end of
// the test. legacy, if not nil, tells the layout of an unlabelled Lease
// (one of a version before layouts) by its name (layout.LegacyNames).
func Start(t testing.TB, client kubernetes.Interface, namespace, group string, legacy func(string) (string, bool)) *Watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &Watch{group: group, legacy: legacy, stop: cancel, held: map[string]string{},
		released: map[string]time.Time{}, releasedLease: map[string]time.Time{}, acquired: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Coordination().V1().Leases().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.saw,
		UpdateFunc: func(_, obj any) { w.saw(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if lease, ok := obj.(*coordinationv1.Lease); ok {
				w.mu.Lock()
				delete(w.held, lease.Name)
				w.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

// saw records a unit Lease of the group as held by its layout, or not
// held: no holder, or a fence's stand-in or tombstone holder, in
// parentheses.
func (w *Watch) saw(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name == layout.FenceName(w.group) {
		return
	}
	l, unit := lease.Labels[layout.Label], lease.Labels[layout.GroupLabel] == membership.GroupLabelValue(w.group)
	if !unit && lease.Labels[layout.GroupLabel] == "" && w.legacy != nil {
		l, unit = w.legacy(lease.Name)
	}
	if !unit {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" || strings.HasPrefix(holder, "(") {
		if _, ok := w.held[lease.Name]; ok {
			w.released[l] = time.Now()
			w.releasedLease[lease.Name] = w.released[l]
		}
		delete(w.held, lease.Name)
		return
	}
	if _, ok := w.acquired[lease.Name]; !ok {
		w.acquired[lease.Name] = time.Now()
	}
	w.held[lease.Name] = l
	layouts := map[string]bool{}
	for _, l := range w.held {
		layouts[l] = true
	}
	if len(layouts) > 1 {
		w.overlaps = append(w.overlaps, fmt.Sprintf("%s %v", time.Now().UTC().Format("15:04:05.000"), maps.Clone(w.held)))
	}
}

// Handover is from the last release seen of a Lease of layout from to the
// first acquisition seen of the last of leases (all of them held).
func (w *Watch) Handover(from string, leases []string) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, name := range leases {
		at, ok := w.acquired[name]
		if !ok {
			return 0, false
		}
		if at.After(last) {
			last = at
		}
	}
	released, ok := w.released[from]
	return last.Sub(released), ok && !last.Before(released)
}

// Released is when the Lease name was last seen released; zero if never.
func (w *Watch) Released(name string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.releasedLease[name]
}

// Stop stops following the Leases.
func (w *Watch) Stop() { w.stop() }

// Overlaps are the moments seen so far at which Leases of two layouts were
// held, each with the held Leases and their layouts.
func (w *Watch) Overlaps() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.overlaps)
}
