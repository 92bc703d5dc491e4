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

package shard

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// filteredListerWatcher passes only the objects keep accepts: lists keep
// their matches, watches drop the events of objects that do not match.
// Stand-in for pkg/controller's filtered ListerWatcher: it does not turn
// the event of a held object that stopped matching (a changed controller
// owner) into a DELETED.
type filteredListerWatcher struct {
	inner *selectingListerWatcher
	keep  func(metav1.Object) bool
}

func newFilteredListerWatcher(inner *selectingListerWatcher, keep func(metav1.Object) bool) cache.ListerWatcher {
	return &filteredListerWatcher{inner: inner, keep: keep}
}

func (f *filteredListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return f.inner.IsWatchListSemanticsUnSupported()
}

func (f *filteredListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), options)
}

func (f *filteredListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), options)
}

func (f *filteredListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	list, err := f.inner.ListWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, err
	}
	kept := items[:0]
	for _, item := range items {
		if obj, err := meta.Accessor(item); err != nil || f.keep(obj) {
			kept = append(kept, item)
		}
	}
	if err := meta.SetList(list, kept); err != nil {
		return nil, err
	}
	return list, nil
}

func (f *filteredListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := f.inner.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type == watch.Bookmark || ev.Type == watch.Error {
			return ev, true
		}
		obj, err := meta.Accessor(ev.Object)
		return ev, err != nil || f.keep(obj)
	}), nil
}
