// Package stash keeps what one API version can express and another cannot in
// an annotation, as the core API does, so that conversions are lossless:
// the converter that cannot express a value puts it under a key, and the
// converter back takes it off again.
package stash

import (
	"encoding/json"
	"fmt"

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
// reports whether the annotation was there; a value that does not decode is
// an error, never silently dropped.
func Take(meta *metav1.ObjectMeta, key string, value any) (bool, error) {
	data, ok := meta.Annotations[key]
	if !ok {
		return false, nil
	}
	delete(meta.Annotations, key)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
	if err := json.Unmarshal([]byte(data), value); err != nil {
		return true, fmt.Errorf("annotation %s holds %q, not what the conversion recorded: %w", key, data, err)
	}
	return true, nil
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
