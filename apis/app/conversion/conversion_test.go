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
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
)

// rounds is how many random objects each round-trip test converts.
const rounds = 2000

func newFiller(t *testing.T) *randfill.Filler {
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appv1.AddToScheme, appv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	exposures := []appv1.Exposure{appv1.ExposureNone, appv1.ExposureService, appv1.ExposureIngress, "", "LoadBalancer"}
	pullPolicies := []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever, "", "Sometimes"}
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []any {
		return []any{
			// Mostly the enum's values, sometimes what the schema would refuse:
			// the conversion must not lose those either.
			func(e *appv1.Exposure, c randfill.Continue) { *e = exposures[c.Intn(len(exposures))] },
			func(p *corev1.PullPolicy, c randfill.Continue) { *p = pullPolicies[c.Intn(len(pullPolicies))] },
		}
	})
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), serializer.NewCodecFactory(scheme)).NilChance(0.2)
}

// setTypeMeta makes the TypeMeta what a conversion to that version writes.
func setTypeMeta(obj *metav1.TypeMeta, gv string) { obj.APIVersion, obj.Kind = gv, "App" }

func TestRoundTripV1beta1(t *testing.T) {
	f := newFiller(t)
	for i := range rounds {
		var in appv1beta1.App
		f.Fill(&in)
		setTypeMeta(&in.TypeMeta, appv1beta1.SchemeGroupVersion.String())
		var mid appv1.App
		if err := V1beta1ToV1(&in, &mid); err != nil {
			t.Fatalf("round %d: to v1: %v", i, err)
		}
		var out appv1beta1.App
		if err := V1ToV1beta1(&mid, &out); err != nil {
			t.Fatalf("round %d: back to v1beta1: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(&in, &out) {
			t.Fatalf("round %d: v1beta1 -> v1 -> v1beta1 changed the App:\n%s", i, diff.Diff(&in, &out))
		}
	}
}

func TestRoundTripV1(t *testing.T) {
	f := newFiller(t)
	for i := range rounds {
		var in appv1.App
		f.Fill(&in)
		setTypeMeta(&in.TypeMeta, appv1.SchemeGroupVersion.String())
		var mid appv1beta1.App
		if err := V1ToV1beta1(&in, &mid); err != nil {
			t.Fatalf("round %d: to v1beta1: %v", i, err)
		}
		var out appv1.App
		if err := V1beta1ToV1(&mid, &out); err != nil {
			t.Fatalf("round %d: back to v1: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(&in, &out) {
			t.Fatalf("round %d: v1 -> v1beta1 -> v1 changed the App:\n%s", i, diff.Diff(&in, &out))
		}
	}
}

// The conversions leave their input alone: the webhook converts objects it
// does not own.
func TestConversionDoesNotTouchInput(t *testing.T) {
	f := newFiller(t)
	for range 200 {
		var in appv1beta1.App
		f.Fill(&in)
		in.Spec.EnableService, in.Spec.EnableIngress = false, true // needs the annotation
		before := in.DeepCopy()
		var out appv1.App
		if err := V1beta1ToV1(&in, &out); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(before, &in) {
			t.Fatalf("V1beta1ToV1 changed its input:\n%s", diff.Diff(before, &in))
		}
	}
}

// Each v1beta1 combination reads as the v1 exposure that means the same,
// and only the one v1 cannot say leaves an annotation.
func TestExposure(t *testing.T) {
	for _, tc := range []struct {
		service, ingress bool
		want             appv1.Exposure
		annotated        bool
	}{
		{false, false, appv1.ExposureNone, false},
		{true, false, appv1.ExposureService, false},
		{true, true, appv1.ExposureIngress, false},
		{false, true, appv1.ExposureIngress, true},
	} {
		in := appv1beta1.App{Spec: appv1beta1.AppSpec{Image: "nginx:1.27", EnableService: tc.service, EnableIngress: tc.ingress}}
		var out appv1.App
		if err := V1beta1ToV1(&in, &out); err != nil {
			t.Fatal(err)
		}
		_, annotated := out.Annotations[V1beta1SpecAnnotation]
		if out.Spec.Exposure != tc.want || annotated != tc.annotated {
			t.Errorf("service=%v ingress=%v: exposure %q, annotated %v; want %q, %v",
				tc.service, tc.ingress, out.Spec.Exposure, annotated, tc.want, tc.annotated)
		}
	}
}

// A v1 client that changes the exposure of an App read with the annotation
// gets what it asked for: the stale annotation does not win.
func TestStaleAnnotationLoses(t *testing.T) {
	in := appv1beta1.App{Spec: appv1beta1.AppSpec{Image: "nginx:1.27", EnableIngress: true}}
	var v1App appv1.App
	if err := V1beta1ToV1(&in, &v1App); err != nil {
		t.Fatal(err)
	}
	v1App.Spec.Exposure = appv1.ExposureService
	var out appv1beta1.App
	if err := V1ToV1beta1(&v1App, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Spec.EnableService || out.Spec.EnableIngress || len(out.Annotations) != 0 {
		t.Errorf("got service=%v ingress=%v annotations %v; want service only, no annotations",
			out.Spec.EnableService, out.Spec.EnableIngress, out.Annotations)
	}
}

// The webhook's path: unstructured in, unstructured out, through JSON-shaped
// maps; an unknown field is an error, not dropped.
func TestConverter(t *testing.T) {
	ctx := context.Background()
	beta := &appv1beta1.App{
		TypeMeta:   metav1.TypeMeta{APIVersion: "ingress.example.com/v1beta1", Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{"a": "b"}},
		Spec: appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0), EnableIngress: true, Port: 8080,
			ImagePullPolicy: corev1.PullNever},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(beta)
	if err != nil {
		t.Fatal(err)
	}
	v1Obj, err := Converter{}.Convert(ctx, &unstructured.Unstructured{Object: m}, "ingress.example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(v1Obj.Object, "spec", "exposure"); got != "Ingress" {
		t.Errorf("spec.exposure = %q, want Ingress", got)
	}
	if got, _, _ := unstructured.NestedInt64(v1Obj.Object, "spec", "replicas"); got != 0 {
		t.Errorf("spec.replicas = %d, want 0", got)
	}
	if got, _, _ := unstructured.NestedString(v1Obj.Object, "spec", "imagePullPolicy"); got != "Never" {
		t.Errorf("spec.imagePullPolicy = %q, want Never", got)
	}
	back, err := Converter{}.Convert(ctx, v1Obj, "ingress.example.com/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	// Both booleans come back, false included, as v1beta1's schema
	// defaults them on a stored v1beta1 App.
	m["spec"].(map[string]any)["enable_service"] = false
	if !apiequality.Semantic.DeepEqual(back.Object, m) {
		t.Errorf("unstructured round trip changed the App:\n%s", diff.Diff(m, back.Object))
	}

	unknown := v1Obj.DeepCopy()
	if err := unstructured.SetNestedField(unknown.Object, "x", "spec", "hostname"); err != nil {
		t.Fatal(err)
	}
	if _, err := (Converter{}).Convert(ctx, unknown, "ingress.example.com/v1beta1"); err == nil {
		t.Error("an unknown field spec.hostname converted without an error")
	} else {
		t.Logf("unknown field: %v", err)
	}
	if _, err := (Converter{}).Convert(ctx, v1Obj, "ingress.example.com/v2"); err == nil {
		t.Error("conversion to an unknown version succeeded")
	}
}

// Issue 21, item 4: a reserved annotation that does not decode (written by
// a user, not by the conversion) is dropped and the rest converts, in both
// directions: one such App must not fail a whole ConversionReview.
func TestUndecodableAnnotationIsIgnored(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		from, to, key, value string
		spec                 map[string]any
		wantField            string
		want                 any
	}{
		{"ingress.example.com/v1beta1", "ingress.example.com/v1", V1SpecAnnotation, "not json",
			map[string]any{"image": "nginx:1.27", "enable_service": true}, "exposure", "Service"},
		{"ingress.example.com/v1beta1", "ingress.example.com/v1", V1SpecAnnotation, `{"exposure":5}`,
			map[string]any{"image": "nginx:1.27", "enable_service": true, "enable_ingress": true}, "exposure", "Ingress"},
		{"ingress.example.com/v1", "ingress.example.com/v1beta1", V1beta1SpecAnnotation, `{"enable_service":"yes"}`,
			map[string]any{"image": "nginx:1.27", "exposure": "Service"}, "enable_service", true},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": tc.from, "kind": "App",
			"metadata": map[string]any{"name": "web", "namespace": "default", "annotations": map[string]any{tc.key: tc.value, "keep": "me"}},
			"spec":     tc.spec,
		}}
		out, err := Converter{}.Convert(ctx, obj, tc.to)
		if err != nil {
			t.Fatalf("%s %s=%q to %s: %v", tc.from, tc.key, tc.value, tc.to, err)
		}
		if got, _, _ := unstructured.NestedFieldNoCopy(out.Object, "spec", tc.wantField); got != tc.want {
			t.Errorf("%s=%q: spec.%s = %v, want %v", tc.key, tc.value, tc.wantField, got, tc.want)
		}
		if a := out.GetAnnotations(); a[tc.key] != "" || a["keep"] != "me" {
			t.Errorf("%s=%q: annotations %v, want the undecodable one dropped and the others kept", tc.key, tc.value, a)
		}
	}
}

// A v1 App with no exposure reads at v1beta1 with both booleans false, as a
// stored v1beta1 App read: a client that compares fields finds them.
func TestConverterWritesFalseBooleans(t *testing.T) {
	v1App := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ingress.example.com/v1", "kind": "App",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec":     map[string]any{"image": "nginx:1.27", "exposure": "None", "port": int64(80)},
	}}
	beta, err := Converter{}.Convert(context.Background(), v1App, "ingress.example.com/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"enable_service", "enable_ingress"} {
		if got, found, _ := unstructured.NestedBool(beta.Object, "spec", field); !found || got {
			t.Errorf("spec.%s = %v (set: %v), want false, set", field, got, found)
		}
	}
}
