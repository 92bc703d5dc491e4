package conversion

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/apis/internal/convert"
)

// Converter converts App objects of a ConversionReview.
type Converter struct{}

// Convert converts obj to toAPIVersion ("group/version").
func (Converter) Convert(_ context.Context, obj *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error) {
	from := obj.GetAPIVersion()
	switch {
	case from == toAPIVersion:
		return obj.DeepCopy(), nil
	case from == appv1beta1.SchemeGroupVersion.String() && toAPIVersion == appv1.SchemeGroupVersion.String():
		return convert.Unstructured(obj, V1beta1ToV1)
	case from == appv1.SchemeGroupVersion.String() && toAPIVersion == appv1beta1.SchemeGroupVersion.String():
		return convert.Unstructured(obj, V1ToV1beta1)
	}
	return nil, fmt.Errorf("cannot convert App %s/%s from %q to %q: the versions are %s and %s",
		obj.GetNamespace(), obj.GetName(), from, toAPIVersion, appv1beta1.SchemeGroupVersion, appv1.SchemeGroupVersion)
}
