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

// Package conversion converts App objects between v1beta1 (the design notes'
// API) and v1 (the API conventions' shape, stored). Both directions are
// lossless: what one version cannot express is kept in an annotation that
// the conversion back takes off again.
package conversion

import (
	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/apis/internal/stash"
)

// Annotations reserved for the conversion. Each is written by the
// conversion into one version and removed by the conversion out of it, so a
// v1beta1 App never carries the first, and a v1 App never the second.
const (
	// V1beta1SpecAnnotation keeps, on a v1 App, the v1beta1 enable_service and
	// enable_ingress when no v1 exposure says the same (an Ingress without a
	// Service, which validation rejects but conversion must not lose).
	V1beta1SpecAnnotation = "conversion.ingress.example.com/v1beta1-spec"
	// V1SpecAnnotation keeps, on a v1beta1 App, a v1 exposure that the two
	// booleans cannot say (empty, or not one of the enum's values).
	V1SpecAnnotation = "conversion.ingress.example.com/v1-spec"
)

// ReservedAnnotations are the conversion's annotations and what each holds.
// Only the conversion writes them; the validating webhook refuses users'.
var ReservedAnnotations = stash.Reserved{
	V1beta1SpecAnnotation: func() any { return &v1beta1Exposure{} },
	V1SpecAnnotation:      func() any { return &v1Exposure{} },
}

// v1beta1Exposure is the part of a v1beta1 spec that v1 says as Exposure.
type v1beta1Exposure struct {
	EnableService bool `json:"enable_service"`
	EnableIngress bool `json:"enable_ingress"`
}

// v1Exposure is the part of a v1 spec that v1beta1 says as two booleans.
type v1Exposure struct {
	Exposure appv1.Exposure `json:"exposure"`
}

func exposureOf(e v1beta1Exposure) appv1.Exposure {
	switch {
	case e.EnableIngress:
		return appv1.ExposureIngress
	case e.EnableService:
		return appv1.ExposureService
	default:
		return appv1.ExposureNone
	}
}

func booleansOf(x appv1.Exposure) v1beta1Exposure {
	switch x {
	case appv1.ExposureIngress:
		return v1beta1Exposure{EnableService: true, EnableIngress: true}
	case appv1.ExposureService:
		return v1beta1Exposure{EnableService: true}
	default:
		return v1beta1Exposure{}
	}
}

// V1beta1ToV1 converts in into out. out shares nothing with in.
func V1beta1ToV1(in *appv1beta1.App, out *appv1.App) error {
	in = in.DeepCopy()
	*out = appv1.App{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: in.ObjectMeta,
		Spec: appv1.AppSpec{
			Image:           in.Spec.Image,
			Replicas:        in.Spec.Replicas,
			Port:            in.Spec.Port,
			ImagePullPolicy: in.Spec.ImagePullPolicy,
		},
		Status: appv1.AppStatus(in.Status),
	}
	out.APIVersion = appv1.SchemeGroupVersion.String()
	// A v1beta1 App never legitimately carries this v1-side key.
	stash.Drop(&out.ObjectMeta, V1beta1SpecAnnotation)

	beta := v1beta1Exposure{EnableService: in.Spec.EnableService, EnableIngress: in.Spec.EnableIngress}
	out.Spec.Exposure = exposureOf(beta)
	var kept v1Exposure
	restored := stash.Take(&out.ObjectMeta, V1SpecAnnotation, &kept)
	switch {
	case restored && booleansOf(kept.Exposure) == beta:
		// The v1 value this App was written with, still what the booleans say.
		out.Spec.Exposure = kept.Exposure
	case booleansOf(out.Spec.Exposure) != beta:
		if err := stash.Put(&out.ObjectMeta, V1beta1SpecAnnotation, beta); err != nil {
			return err
		}
	}
	return nil
}

// V1ToV1beta1 converts in into out. out shares nothing with in.
func V1ToV1beta1(in *appv1.App, out *appv1beta1.App) error {
	in = in.DeepCopy()
	*out = appv1beta1.App{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: in.ObjectMeta,
		Spec: appv1beta1.AppSpec{
			Image:           in.Spec.Image,
			Replicas:        in.Spec.Replicas,
			Port:            in.Spec.Port,
			ImagePullPolicy: in.Spec.ImagePullPolicy,
		},
		Status: appv1beta1.AppStatus(in.Status),
	}
	out.APIVersion = appv1beta1.SchemeGroupVersion.String()
	stash.Drop(&out.ObjectMeta, V1SpecAnnotation)

	beta := booleansOf(in.Spec.Exposure)
	var kept v1beta1Exposure
	restored := stash.Take(&out.ObjectMeta, V1beta1SpecAnnotation, &kept)
	if restored && exposureOf(kept) == in.Spec.Exposure {
		// The v1beta1 booleans this App was stored with, still what the
		// exposure says; an exposure changed since wins.
		beta = kept
	}
	out.Spec.EnableService, out.Spec.EnableIngress = beta.EnableService, beta.EnableIngress
	if exposureOf(beta) != in.Spec.Exposure {
		if err := stash.Put(&out.ObjectMeta, V1SpecAnnotation, v1Exposure{Exposure: in.Spec.Exposure}); err != nil {
			return err
		}
	}
	return nil
}
