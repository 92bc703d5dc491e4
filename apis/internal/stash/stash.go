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

// Package stash keeps what one API version can express and another cannot in
// an annotation, as the core API does, so that conversions are lossless:
// the converter that cannot express a value puts it under a key, and the
// converter back takes it off again.
package stash

import (
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Put records value as JSON in meta's annotation key.
func Put(meta *metav1.ObjectMeta, key string, value any) error {
	data, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("recording %s: %w", key, err)
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = string(data)
	return nil
}

// Take removes the annotation key from meta and decodes it into value. It
// reports whether a value was restored. A value that does not decode was not
// written by the conversion (the validating webhook refuses users' writes of
// the key, but an object may predate it or have been written with the
// webhooks off): it is dropped like a missing one, so that the rest of the
// object converts. Failing instead would fail the whole ConversionReview it
// came in, and with it every LIST and watch of the kind in that version.
// Converters report such values with Undecodable first.
func Take(meta *metav1.ObjectMeta, key string, value any) bool {
	data, ok := meta.Annotations[key]
	if !ok {
		return false
	}
	Drop(meta, key)
	return json.Unmarshal([]byte(data), value) == nil
}

// Reserved maps each annotation reserved for a conversion to a function
// returning a new value of the type it holds.
type Reserved map[string]func() any

// Keys returns the reserved annotations, sorted.
func (r Reserved) Keys() []string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Undecodable returns, sorted, the reserved annotations of annotations
// whose value does not decode into its type: the ones Take will ignore.
func (r Reserved) Undecodable(annotations map[string]string) []string {
	var out []string
	for _, key := range r.Keys() {
		if data, ok := annotations[key]; ok && json.Unmarshal([]byte(data), r[key]()) != nil {
			out = append(out, key)
		}
	}
	return out
}

// Drop removes the annotation key from meta, if it is there.
func Drop(meta *metav1.ObjectMeta, key string) {
	if _, ok := meta.Annotations[key]; !ok {
		return
	}
	delete(meta.Annotations, key)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
}
