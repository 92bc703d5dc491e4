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

// Package factories holds the informer factories one set of controllers
// shares: one per kind of client (built-in types, this project's own,
// metadata only) and any number of filtered ones by name. The manager
// builds every controller of a set on them, then starts them all, waits for
// them and shuts them down together.
package factories

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
)

// Factories are the informer factories of one set of controllers.
type Factories struct {
	Kube     informers.SharedInformerFactory
	CRD      crdinformers.SharedInformerFactory
	Metadata metadatainformer.SharedInformerFactory

	kube   kubernetes.Interface
	resync time.Duration
	// transform is every factory's transform; a filtered factory may add
	// its own options after it.
	transform cache.TransformFunc

	mu       sync.Mutex
	filtered map[string]informers.SharedInformerFactory
	// stop is set once Start has run.
	stop <-chan struct{}
}

// New returns the factories of the three clients, each informer resyncing
// every resync and transforming what it caches with transform.
func New(kube kubernetes.Interface, crd versioned.Interface, md metadata.Interface, resync time.Duration, transform cache.TransformFunc) *Factories {
	return &Factories{
		Kube:      informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithTransform(transform)),
		CRD:       crdinformers.NewSharedInformerFactoryWithOptions(crd, resync, crdinformers.WithTransform(transform)),
		Metadata:  metadatainformer.NewSharedInformerFactoryWithOptions(md, resync, metadatainformer.WithTransform(transform)),
		kube:      kube,
		resync:    resync,
		transform: transform,
		filtered:  map[string]informers.SharedInformerFactory{},
	}
}

// Filtered returns the factory for built-in types called name, made on
// first use with the built-in client, resync and transform, then opts (a
// label selector, a transform of its own): for informers Kube cannot give,
// such as the pods with a label. A controller rebuilt later gets the same
// factory, started.
func (f *Factories) Filtered(name string, opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
	f.mu.Lock()
	defer f.mu.Unlock()
	if factory, ok := f.filtered[name]; ok {
		return factory
	}
	factory := informers.NewSharedInformerFactoryWithOptions(f.kube, f.resync,
		slices.Concat([]informers.SharedInformerOption{informers.WithTransform(f.transform)}, opts)...)
	f.filtered[name] = factory
	return factory
}

// started is every factory made so far.
type started interface {
	Start(stop <-chan struct{})
	Shutdown()
}

func (f *Factories) all() []started {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := []started{f.Kube, f.CRD, f.Metadata}
	for _, factory := range f.filtered {
		all = append(all, factory)
	}
	return all
}

// Start starts every informer requested so far, until stop is closed; a
// later Start (a controller rebuilt on running factories) starts only the
// informers added since.
func (f *Factories) Start(stop <-chan struct{}) {
	f.mu.Lock()
	if f.stop == nil {
		f.stop = stop
	}
	stop = f.stop
	f.mu.Unlock()
	for _, factory := range f.all() {
		factory.Start(stop)
	}
}

// StartNew starts the informers added since Start, if it has run.
func (f *Factories) StartNew() {
	f.mu.Lock()
	stop := f.stop
	f.mu.Unlock()
	if stop != nil {
		f.Start(stop)
	}
}

// WaitForCacheSync waits until every informer started has synced, or stop
// is closed; it reports whether they synced.
func (f *Factories) WaitForCacheSync(stop <-chan struct{}) bool {
	ok := allSynced(f.Kube.WaitForCacheSync(stop)) && allSynced(f.CRD.WaitForCacheSync(stop)) &&
		allSynced(f.Metadata.WaitForCacheSync(stop))
	f.mu.Lock()
	filtered := slices.Collect(maps.Values(f.filtered))
	f.mu.Unlock()
	for _, factory := range filtered {
		ok = ok && allSynced(factory.WaitForCacheSync(stop))
	}
	return ok
}

// Shutdown waits for every informer to stop, once stop is closed.
func (f *Factories) Shutdown() {
	for _, factory := range f.all() {
		factory.Shutdown()
	}
}

func allSynced[K comparable](synced map[K]bool) bool {
	for _, ok := range synced {
		if !ok {
			return false
		}
	}
	return true
}
