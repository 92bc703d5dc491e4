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

// Package cleanup is the Cleanup controller: a sweeper driven not by watches
// but by a ticker that pushes a generic event into a channel. Each sweep
// removes what this manager left behind: children, model-storage PVs
// included, whose controller is gone. Nothing is removed before it has been
// seen stale for the stale period, counted from the time recorded on the
// object, so that leader changes and restarts do not restart it.
package cleanup

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/ndsl/controller-manager/pkg/controller"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
)

// ControllerName is the name used by --controllers, the queue and metrics.
const ControllerName = "cleanup"

// sweepKey is the one key the queue ever holds: a sweep looks at everything.
var sweepKey = controller.Key{Name: "sweep"}

// Kinds of children this manager creates, which the sweeper removes once orphaned.
var dependentKinds = []trackedKind{
	{kind: "Deployment", apiVersion: "apps/v1", resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
	{kind: "Service", apiVersion: "v1", resource: schema.GroupVersionResource{Version: "v1", Resource: "services"}},
	{kind: "Ingress", apiVersion: "networking.k8s.io/v1", resource: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}},
	{kind: "PersistentVolumeClaim", apiVersion: "v1", resource: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}},
}

var pvKind = trackedKind{kind: "PersistentVolume", apiVersion: "v1", resource: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}}

// Kinds of owners whose children this manager creates.
var ownerKinds = map[schema.GroupKind]ownerKind{
	{Group: "ingress.example.com", Kind: "App"}:       {resource: schema.GroupVersionResource{Group: "ingress.example.com", Version: "v1beta1", Resource: "apps"}},
	{Group: "distri-infer.ndsl.cn", Kind: "Pipeline"}: {resource: schema.GroupVersionResource{Group: "distri-infer.ndsl.cn", Version: "v1beta1", Resource: "pipelines"}, clusterScoped: true},
	{Group: "", Kind: "Service"}:                      {resource: schema.GroupVersionResource{Version: "v1", Resource: "services"}},
}

// Controller sweeps stale objects on a timer.
type Controller struct {
	controller.Base
	client   metadata.Interface
	recorder record.EventRecorder
	opts     Options
	clock    clock.PassiveClock

	dependents map[trackedKind]cache.GenericLister
	owners     map[schema.GroupKind]cache.GenericLister

	// ticks is the generic-event channel the ticker feeds (Base.Events).
	ticks chan controller.Key

	mu sync.Mutex
	// staleSince records when this process first saw each object stale, an
	// object that stops being stale being forgotten. What counts is the time
	// recorded on the object (StaleSinceAnnotation); this serves a dry run,
	// which writes none, and a record not written yet.
	staleSince map[types.UID]staleEntry
}

type staleEntry struct {
	since    time.Time
	reported bool // dry run: reported once
}

// NewController builds the controller on the manager's shared typed
// informers, the ones the other controllers cache these kinds in, rather
// than a metadata-only copy: one watch and one cache per kind in the
// process. dependentInformers are the children's (selected by
// ManagedByLabel, all the sweeper looks at), kubeInformers the owner
// Services'. The sweeper reads only metadata from them. It starts nothing.
func NewController(
	dependentInformers informers.SharedInformerFactory,
	kubeInformers informers.SharedInformerFactory,
	crdInformers crdinformers.SharedInformerFactory,
	client metadata.Interface,
	recorder record.EventRecorder,
	opts Options,
) (*Controller, error) {
	ticks := make(chan controller.Key, 1)
	c := &Controller{
		// One worker: sweeps never overlap, and ticks during a sweep
		// coalesce into one more sweep because the queue holds the key
		// only once.
		Base:       controller.NewBase(ControllerName, 1, opts.Queue),
		client:     client,
		recorder:   recorder,
		opts:       opts,
		clock:      clock.RealClock{},
		dependents: map[trackedKind]cache.GenericLister{},
		owners:     map[schema.GroupKind]cache.GenericLister{},
		ticks:      ticks,
		staleSince: map[types.UID]staleEntry{},
	}
	informerFor := func(kube informers.SharedInformerFactory, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, cache.GenericLister, error) {
		if inf, err := kube.ForResource(gvr); err == nil {
			return inf.Informer(), inf.Lister(), nil
		}
		inf, err := crdInformers.ForResource(gvr)
		if err != nil {
			return nil, nil, fmt.Errorf("no shared informer for %s: %w", gvr, err)
		}
		return inf.Informer(), inf.Lister(), nil
	}
	for _, k := range append(dependentKinds, pvKind) {
		inf, lister, err := informerFor(dependentInformers, k.resource)
		if err != nil {
			return nil, err
		}
		c.dependents[k] = lister
		c.Synced = append(c.Synced, inf.HasSynced)
	}
	for gk, o := range ownerKinds {
		inf, lister, err := informerFor(kubeInformers, o.resource)
		if err != nil {
			return nil, err
		}
		c.owners[gk] = lister
		c.Synced = append(c.Synced, inf.HasSynced)
	}
	c.Reconcile = c.sweep
	c.Events = ticks
	return c, nil
}

// Run sweeps once the caches have synced, then on every tick until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	registerMetrics()
	c.Queue.Add(sweepKey) // the first sweep, as soon as the caches have synced
	go c.runTicker(ctx)
	c.Base.Run(ctx)
}

// runTicker sends a generic event every interval, dropping ticks while one
// is still waiting.
func (c *Controller) runTicker(ctx context.Context) {
	ticker := time.NewTicker(c.opts.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			controller.TrySend(c.ticks, sweepKey)
		}
	}
}

// objectRef names a swept object in events.
func objectRef(k trackedKind, namespace, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: k.kind, APIVersion: k.apiVersion, Namespace: namespace, Name: name, UID: uid}
}
