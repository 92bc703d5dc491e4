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

// Package convert runs a typed conversion function on the unstructured
// objects a ConversionReview carries.
package convert

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Unstructured decodes obj into a From, converts it with fn and encodes the
// result. A field the From type does not know is an error: a conversion
// never drops a field silently.
func Unstructured[From, To any](obj *unstructured.Unstructured, fn func(*From, *To) error) (*unstructured.Unstructured, error) {
	in := new(From)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, in, true); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", obj.GetAPIVersion(), name(obj), err)
	}
	out := new(To)
	if err := fn(in, out); err != nil {
		return nil, fmt.Errorf("converting %s %s: %w", obj.GetAPIVersion(), name(obj), err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name(obj), err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func name(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
