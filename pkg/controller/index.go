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
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ControllerIndex returns the name and function of the informer index of
// objects by the UID of their controller (the owner reference with
// controller: true) when that controller is of ownerKind, so that an owner
// finds its children without a list of the whole cache. Objects of other
// controllers, or of none, are in no bucket and cost the index nothing.
func ControllerIndex(ownerKind schema.GroupKind) (string, cache.IndexFunc) {
	return "controller-uid/" + ownerKind.String(), func(obj any) ([]string, error) {
		o, ok := objectMeta(obj) // a tombstone's object too
		if !ok {
			return nil, nil
		}
		ref := controllerOfKind(o, ownerKind)
		if ref == nil || ref.UID == "" {
			return nil, nil
		}
		return []string{string(ref.UID)}, nil
	}
}

// AddIndexers adds to a shared informer the indexers it does not have yet,
// by name, so that controllers sharing an informer, or one rebuilt on it
// after losing its Lease, can each ask for the same index: client-go fails
// on a name added twice. One name must always mean one function, hence
// names made with their function, as ControllerIndex does. client-go
// indexes what the informer already holds when it has started.
func AddIndexers(informer cache.SharedIndexInformer, indexers cache.Indexers) error {
	have := informer.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, f := range indexers {
		if _, ok := have[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := informer.AddIndexers(missing); err != nil {
		return fmt.Errorf("adding the informer indexes %v: %w", slices.Sorted(maps.Keys(missing)), err)
	}
	return nil
}
