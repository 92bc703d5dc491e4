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

package conversion

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/apis/internal/convert"
)

// Converter converts App objects of a ConversionReview.
type Converter struct{}

// Convert converts obj to toAPIVersion ("group/version").
func (Converter) Convert(ctx context.Context, obj *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error) {
	from := obj.GetAPIVersion()
	if keys := ReservedAnnotations.Undecodable(obj.GetAnnotations()); len(keys) > 0 && from != toAPIVersion {
		// Not the conversion's: the conversion drops them and converts the
		// rest, so that one object never fails a whole LIST.
		klog.FromContext(ctx).V(2).Info("Ignoring undecodable conversion annotations", "kind", "App", "object", klog.KObj(obj), "annotations", keys)
	}
	switch {
	case from == toAPIVersion:
		return obj.DeepCopy(), nil
	case from == appv1beta1.SchemeGroupVersion.String() && toAPIVersion == appv1.SchemeGroupVersion.String():
		return convert.Unstructured(obj, V1beta1ToV1)
	case from == appv1.SchemeGroupVersion.String() && toAPIVersion == appv1beta1.SchemeGroupVersion.String():
		out, err := convert.Unstructured(obj, V1ToV1beta1)
		if err != nil {
			return nil, err
		}
		withFalseBooleans(out)
		return out, nil
	}
	return nil, fmt.Errorf("cannot convert App %s/%s from %q to %q: the versions are %s and %s",
		obj.GetNamespace(), obj.GetName(), from, toAPIVersion, appv1beta1.SchemeGroupVersion, appv1.SchemeGroupVersion)
}

// withFalseBooleans writes enable_service and enable_ingress even when
// false, as v1beta1's schema defaults them: a v1beta1 client reads an App
// stored at v1 as it read one stored at v1beta1. (The API server defaults
// an object it read from etcd by the storage version's schema only, not
// after converting it.)
func withFalseBooleans(app *unstructured.Unstructured) {
	spec, ok := app.Object["spec"].(map[string]any)
	if !ok {
		return
	}
	for _, field := range []string{"enable_service", "enable_ingress"} {
		if _, set := spec[field]; !set {
			spec[field] = false
		}
	}
}
