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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Keeps returns whether an object belongs to s by k.
func (s Shard) Keeps(k Key) func(obj metav1.Object) bool {
	return func(obj metav1.Object) bool { return s.containsHash(k.place(obj)) }
}

// Predicate is Keeps for what an event handler receives: an object or the
// tombstone of one. What has no object metadata is kept: no shard could
// place it.
func (s Shard) Predicate(k Key) func(obj any) bool {
	keeps := s.Keeps(k)
	return func(obj any) bool {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		o, err := meta.Accessor(obj)
		if err != nil {
			return true
		}
		return keeps(o)
	}
}
