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
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// countingInformer counts the handlers registered on, and removed from, a
// real shared informer.
type countingInformer struct {
	cache.SharedIndexInformer
	added   []cache.ResourceEventHandlerRegistration
	removed []cache.ResourceEventHandlerRegistration
}

func (c *countingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := c.SharedIndexInformer.AddEventHandler(h)
	if err == nil {
		c.added = append(c.added, reg)
	}
	return reg, err
}

func (c *countingInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	c.removed = append(c.removed, reg)
	return c.SharedIndexInformer.RemoveEventHandler(reg)
}

// A controller that stopped running must not stay registered on the shared
// informers: per-controller mode rebuilds a controller on the same informers
// after each lost Lease, and every stale handler would go on being called.
func TestRunRemovesTheHandlersItRegistered(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	pods := &countingInformer{SharedIndexInformer: factory.Core().V1().Pods().Informer()}
	services := &countingInformer{SharedIndexInformer: factory.Core().V1().Services().Informer()}

	b := NewBase("handlers-test", 1, FIFOQueue)
	b.Reconcile = func(context.Context, Key) (Result, error) { return Result{}, nil }
	for _, informer := range []*countingInformer{pods, pods, services} {
		if err := b.Handle(informer, EnqueueObject(b.Queue)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx)

	for name, informer := range map[string]*countingInformer{"pods": pods, "services": services} {
		if len(informer.removed) != len(informer.added) {
			t.Errorf("%s: %d handlers registered, %d removed after Run returned", name, len(informer.added), len(informer.removed))
		}
		for i := range informer.removed {
			if informer.removed[i] != informer.added[i] {
				t.Errorf("%s: removed handler %d is not the one registered", name, i)
			}
		}
	}
}
