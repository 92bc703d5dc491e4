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
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

const rounds = 2000

func newFiller(t *testing.T) *randfill.Filler {
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{pipelinev1.AddToScheme, pipelinev1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	csiKeys := []string{"type", "server", "share", "mountPermissions"}
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []any {
		return []any{
			// Times as the API serves them, to the second.
			func(t *metav1.Time, c randfill.Continue) { *t = metav1.Unix(c.Int63n(1<<32), 0) },
			// A stray spec.status: any JSON object, compact as the API server keeps it.
			func(r *runtime.RawExtension, c randfill.Continue) {
				phases := []string{"failed", "Running", ""}
				r.Raw = fmt.Appendf(nil, `{"phase":%q,"n":%d}`, phases[c.Intn(len(phases))], c.Int63n(100))
			},
			// Mostly the keys that mean something, so that nfs is common.
			func(m *map[string]string, c randfill.Continue) {
				if c.Bool() {
					*m = nil
					return
				}
				*m = map[string]string{}
				for range c.Intn(4) {
					key := csiKeys[c.Intn(len(csiKeys))]
					if c.Intn(4) == 0 {
						key = c.String(6)
					}
					(*m)[key] = c.String(6)
				}
			},
			func(t *pipelinev1beta1.StorageType, c randfill.Continue) {
				*t = []pipelinev1beta1.StorageType{"", "nfs", "ceph"}[c.Intn(3)]
			},
		}
	})
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), serializer.NewCodecFactory(scheme)).NilChance(0.2)
}

func TestRoundTripV1beta1(t *testing.T) {
	f := newFiller(t)
	for i := range rounds {
		var in pipelinev1beta1.Pipeline
		f.Fill(&in)
		in.APIVersion, in.Kind = pipelinev1beta1.SchemeGroupVersion.String(), "Pipeline"
		var mid pipelinev1.Pipeline
		if err := V1beta1ToV1(&in, &mid); err != nil {
			t.Fatalf("round %d: to v1: %v", i, err)
		}
		var out pipelinev1beta1.Pipeline
		if err := V1ToV1beta1(&mid, &out); err != nil {
			t.Fatalf("round %d: back to v1beta1: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(&in, &out) {
			t.Fatalf("round %d: v1beta1 -> v1 -> v1beta1 changed the Pipeline:\n%s\n%s", i, diff.Diff(&in, &out), diff.ObjectGoPrintSideBySide(&in, &out))
		}
	}
}

func TestRoundTripV1(t *testing.T) {
	f := newFiller(t)
	for i := range rounds {
		var in pipelinev1.Pipeline
		f.Fill(&in)
		in.APIVersion, in.Kind = pipelinev1.SchemeGroupVersion.String(), "Pipeline"
		var mid pipelinev1beta1.Pipeline
		if err := V1ToV1beta1(&in, &mid); err != nil {
			t.Fatalf("round %d: to v1beta1: %v", i, err)
		}
		var out pipelinev1.Pipeline
		if err := V1beta1ToV1(&mid, &out); err != nil {
			t.Fatalf("round %d: back to v1: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(&in, &out) {
			t.Fatalf("round %d: v1 -> v1beta1 -> v1 changed the Pipeline:\n%s", i, diff.Diff(&in, &out))
		}
	}
}

// The notes' sample reads in v1 as the cleaned-up API, with its v1beta1
// peculiarities (type inside csiParameter, spec.status) kept aside, and back
// exactly.
func TestSeedSample(t *testing.T) {
	const sample = `
apiVersion: distri-infer.ndsl.cn/v1beta1
kind: Pipeline
metadata:
  name: facedetection-pipeline
spec:
  steps:
    - image: nginx:latest
      location: xx-test-node236
      model: facedetection-1
      args:
        listenPort: "9080"
    - image: nginx:latest
      location: xx-test-node239
      model: facedetection-2
      args: {}
  modelStorage:
    csiParameter:
      server: 192.168.20.235
      share: /home/aiedge/csiTest
      type: nfs
  status:
    phase: failed
`
	var in pipelinev1beta1.Pipeline
	if err := yaml.UnmarshalStrict([]byte(sample), &in); err != nil {
		t.Fatal(err)
	}
	var out pipelinev1.Pipeline
	if err := V1beta1ToV1(&in, &out); err != nil {
		t.Fatal(err)
	}
	want := pipelinev1.PipelineSpec{
		Steps: []pipelinev1.PipelineStep{
			{Model: "facedetection-1", Image: "nginx:latest", NodeNames: []string{"xx-test-node236"}, Args: map[string]string{"listenPort": "9080"}},
			{Model: "facedetection-2", Image: "nginx:latest", NodeNames: []string{"xx-test-node239"}, Args: map[string]string{}},
		},
		ModelStorage: pipelinev1.ModelStorage{NFS: &pipelinev1.NFSStorage{Server: "192.168.20.235", Path: "/home/aiedge/csiTest"}},
	}
	if !apiequality.Semantic.DeepEqual(out.Spec, want) {
		t.Errorf("v1 spec:\n%s", diff.Diff(want, out.Spec))
	}
	if _, ok := out.Annotations[V1beta1SpecAnnotation]; !ok {
		t.Errorf("no %s annotation keeps the v1beta1 form", V1beta1SpecAnnotation)
	}
	var back pipelinev1beta1.Pipeline
	if err := V1ToV1beta1(&out, &back); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(&in, &back) {
		t.Errorf("round trip:\n%s", diff.Diff(&in, &back))
	}

	// A v1 client changes the spec: its change wins over the stale form.
	out.Spec.ModelStorage.NFS.Server = "nfs.example.com"
	out.Spec.ModelStorage.Size = ptr.To(resource.MustParse("1Gi"))
	if err := V1ToV1beta1(&out, &back); err != nil {
		t.Fatal(err)
	}
	ms := back.Spec.ModelStorage
	if ms.NFSServer() != "nfs.example.com" || ms.EffectiveType() != pipelinev1beta1.StorageTypeNFS || back.Spec.Status != nil || len(back.Annotations) != 0 {
		t.Errorf("after a v1 change: modelStorage %+v, spec.status %v, annotations %v", ms, back.Spec.Status, back.Annotations)
	}
}

// The status the controller writes converts without an annotation: v1's
// per-step deploymentPhase is v1beta1's detailPhase.
func TestControllerStatusNeedsNoAnnotation(t *testing.T) {
	in := pipelinev1beta1.Pipeline{
		Spec: pipelinev1beta1.PipelineSpec{Steps: []pipelinev1beta1.PipelineStep{{Model: "a"}, {Model: "b"}}},
		Status: pipelinev1beta1.PipelineStatus{
			ObservedGeneration: 2, StepCount: 2, Phase: pipelinev1beta1.PhaseRunning,
			Steps:   []pipelinev1beta1.StepStatus{{Model: "a", Replicas: 1, ReadyReplicas: 1}, {Model: "b", Replicas: 2}},
			Storage: &pipelinev1beta1.StorageStatus{PVName: "pv", PVPhase: "Bound", PVCName: "pv", PVCPhase: "Bound"},
			DetailPhase: &pipelinev1beta1.DetailPhase{PVPhase: "Bound", PVCPhase: "Bound", StepsPhase: []pipelinev1beta1.StepPhase{
				{Model: "a", DeploymentPhase: pipelinev1beta1.DeploymentPhaseAvailable},
				{Model: "b", DeploymentPhase: pipelinev1beta1.DeploymentPhaseProgressing},
			}},
		},
	}
	var out pipelinev1.Pipeline
	if err := V1beta1ToV1(&in, &out); err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Annotations[V1beta1StatusAnnotation]; ok {
		t.Errorf("status needed the annotation: %s", out.Annotations[V1beta1StatusAnnotation])
	}
	if got := out.Status.Steps[1].DeploymentPhase; got != "Progressing" {
		t.Errorf("step b deploymentPhase = %q", got)
	}
}

func TestConverterRejectsUnknownFields(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "distri-infer.ndsl.cn/v1", "kind": "Pipeline",
		"metadata": map[string]any{"name": "p"},
		"spec":     map[string]any{"steps": []any{}, "modelStorage": map[string]any{"nfs": map[string]any{"server": "s", "path": "/p", "readOnly": true}}},
	}}
	_, err := Converter{}.Convert(context.Background(), obj, "distri-infer.ndsl.cn/v1beta1")
	if err == nil {
		t.Fatal("an unknown field converted without an error")
	}
	t.Logf("error: %v", err)
}

// Issue 21, item 4: a reserved annotation that does not decode (written by
// a user, not by the conversion) is dropped and the rest converts.
func TestUndecodableAnnotationIsIgnored(t *testing.T) {
	for _, key := range []string{V1beta1SpecAnnotation, V1beta1StatusAnnotation} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "distri-infer.ndsl.cn/v1", "kind": "Pipeline",
			"metadata": map[string]any{"name": "p", "annotations": map[string]any{key: "{broken", "keep": "me"}},
			"spec":     map[string]any{"steps": []any{map[string]any{"model": "m", "image": "i"}}, "modelStorage": map[string]any{"nfs": map[string]any{"server": "s", "path": "/p"}}},
		}}
		out, err := Converter{}.Convert(context.Background(), obj, "distri-infer.ndsl.cn/v1beta1")
		if err != nil {
			t.Fatalf("%s undecodable: %v", key, err)
		}
		if server, _, _ := unstructured.NestedString(out.Object, "spec", "modelStorage", "csiParameter", "server"); server != "s" {
			t.Errorf("%s undecodable: spec not converted: %v", key, out.Object["spec"])
		}
		if a := out.GetAnnotations(); a[key] != "" || a["keep"] != "me" {
			t.Errorf("%s undecodable: annotations %v, want it dropped and the others kept", key, a)
		}
	}
}
