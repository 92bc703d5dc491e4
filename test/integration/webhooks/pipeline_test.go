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

package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

var (
	pipelinesV1beta1 = schema.GroupVersionResource{Group: "distri-infer.ndsl.cn", Version: "v1beta1", Resource: "pipelines"}
	pipelinesV1      = schema.GroupVersionResource{Group: "distri-infer.ndsl.cn", Version: "v1", Resource: "pipelines"}
)

func getPipelineV1beta1(t *testing.T, name string) *pipelinev1beta1.Pipeline {
	t.Helper()
	u, err := dyn.Resource(pipelinesV1beta1).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Pipeline %s: %v", name, err)
	}
	p := &pipelinev1beta1.Pipeline{}
	if err := fromUnstructured(u, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func getPipelineV1(t *testing.T, name string) *pipelinev1.Pipeline {
	t.Helper()
	u, err := dyn.Resource(pipelinesV1).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Pipeline %s as v1: %v", name, err)
	}
	p := &pipelinev1.Pipeline{}
	if err := fromUnstructured(u, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkVersionsAgree reads Pipeline name through both versions at one
// resourceVersion and requires each read to be exactly the other one
// converted: v1 -> v1beta1 gives the v1beta1 read, v1beta1 -> v1 the v1 read.
func checkVersionsAgree(t *testing.T, name string) {
	t.Helper()
	var beta *pipelinev1beta1.Pipeline
	var one *pipelinev1.Pipeline
	// The controller may write status between the two reads: read again until
	// both saw the same object.
	framework.Eventually(t, timeout, "two reads of Pipeline "+name+" at one resourceVersion", func(ctx context.Context) (bool, error) {
		beta, one = getPipelineV1beta1(t, name), getPipelineV1(t, name)
		return beta.ResourceVersion == one.ResourceVersion, nil
	})
	back := &pipelinev1beta1.Pipeline{}
	if err := pipelineconversion.V1ToV1beta1(one, back); err != nil {
		t.Fatalf("converting the v1 read back: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(back, beta) {
		t.Errorf("Pipeline %s: the v1 read converted to v1beta1 differs from the v1beta1 read:\n%s\nvs\n%s", name, toJSON(t, back), toJSON(t, beta))
	}
	forth := &pipelinev1.Pipeline{}
	if err := pipelineconversion.V1beta1ToV1(beta, forth); err != nil {
		t.Fatalf("converting the v1beta1 read: %v", err)
	}
	if one := withoutStaleSpec(t, one); !apiequality.Semantic.DeepEqual(forth, one) {
		t.Errorf("Pipeline %s: the v1beta1 read converted to v1 differs from the v1 read:\n%s\nvs\n%s", name, toJSON(t, forth), toJSON(t, one))
	}
}

// The design notes' Pipeline CR applies unchanged with kubectl (strict field
// validation), with a warning for its spec.status, and converges: phase
// Running, every child's phase in detailPhase, the printer columns, and the
// same object read through v1.
func TestPipelineSeedSample(t *testing.T) {
	setup(t)
	ctx := context.Background()
	if err := cp.CreateFakeNodes(ctx, "xx-test-node236", "xx-test-node239"); err != nil {
		t.Fatal(err)
	}
	framework.StartManager(t, cp.Config, func(o *optionsT) { o.Generic.Controllers = []string{"pipeline"} })
	// The install creates the sample's namespace (--pipeline-namespace); the
	// controller does not.
	if _, _, err := kubectl(t, "apply", "-k", sample(t, "../pipeline-namespace")); err != nil {
		t.Fatalf("kubectl apply -k manifests/pipeline-namespace: %v", err)
	}

	_, stderr, err := kubectl(t, "apply", "-f", sample(t, "design-notes/pipeline-v1beta1.yaml"))
	if err != nil {
		t.Fatalf("kubectl apply of the notes' Pipeline failed: %v", err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), "facedetection-pipeline", metav1.DeleteOptions{})
	})
	if want := `Warning: spec.status is not part of the Pipeline spec and is ignored (it is {"phase":"failed"})`; !strings.Contains(stderr, want) {
		t.Errorf("kubectl printed %q; want the warning %q", stderr, want)
	}

	var p *pipelinev1beta1.Pipeline
	framework.Eventually(t, timeout, "the notes' Pipeline to run", func(ctx context.Context) (bool, error) {
		p = getPipelineV1beta1(t, "facedetection-pipeline")
		return p.Status.Phase == pipelinev1beta1.PhaseRunning, nil
	})
	d := p.Status.DetailPhase
	if d == nil || d.PVPhase != corev1.VolumeBound || d.PVCPhase != corev1.ClaimBound || len(d.StepsPhase) != 2 {
		t.Fatalf("detailPhase = %+v", d)
	}
	for _, s := range d.StepsPhase {
		if s.DeploymentPhase != pipelinev1beta1.DeploymentPhaseAvailable {
			t.Errorf("step %s deploymentPhase %q, want Available", s.Model, s.DeploymentPhase)
		}
	}

	stdout, _, err := kubectl(t, "get", "pipelines.distri-infer.ndsl.cn", "facedetection-pipeline", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	if fields := strings.Fields(stdout); len(fields) < 4 || fields[1] != "facedetection-1,facedetection-2" || fields[2] != "Running" || fields[3] != "True" {
		t.Errorf("kubectl get printed %q; want the models, Running, True", stdout)
	}

	// Read through v1: the cleaned-up shape, the same status.
	v1 := getPipelineV1(t, "facedetection-pipeline")
	nfs := v1.Spec.ModelStorage.NFS
	if nfs == nil || nfs.Server != "192.168.20.235" || nfs.Path != "/home/aiedge/csiTest" {
		t.Errorf("v1 modelStorage = %+v", v1.Spec.ModelStorage)
	}
	if got := v1.Spec.Steps[0].NodeNames; len(got) != 1 || got[0] != "xx-test-node236" {
		t.Errorf("v1 step nodeNames = %q", got)
	}
	if v1.Status.Phase != pipelinev1.PhaseRunning || len(v1.Status.Steps) != 2 || v1.Status.Steps[1].DeploymentPhase != "Available" {
		t.Errorf("v1 status = %+v", v1.Status)
	}
	if _, ok := v1.Annotations[pipelineconversion.V1beta1SpecAnnotation]; !ok {
		t.Errorf("v1 read has no %s annotation keeping the notes' form", pipelineconversion.V1beta1SpecAnnotation)
	}
	checkVersionsAgree(t, "facedetection-pipeline")
}

// Rejections and warnings of Pipelines through the API server. The CRD's
// CEL rules answer first for the storage; the webhook adds the warnings.
func TestPipelineAdmission(t *testing.T) {
	setup(t)
	ctx := context.Background()
	c := newWarningsClient(t)
	pipeline := func(name string, modelStorage map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "distri-infer.ndsl.cn/v1beta1", "kind": "Pipeline",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"steps":        []any{map[string]any{"model": "m", "image": "nginx:1.27"}},
				"modelStorage": modelStorage,
			},
		}}
	}
	cases := []struct {
		name         string
		obj          *unstructured.Unstructured
		wantErr      []string
		wantWarnings []string
	}{{
		name:    "nfs without server",
		obj:     pipeline("no-server", map[string]any{"csiParameter": map[string]any{"type": "nfs", "share": "/x"}}),
		wantErr: []string{"spec.modelStorage", "modelStorage of type nfs requires csiParameter.server and csiParameter.share"},
	}, {
		name:    "no type",
		obj:     pipeline("no-type", map[string]any{"csiParameter": map[string]any{"server": "s", "share": "/x"}}),
		wantErr: []string{"modelStorage needs a type"},
	}, {
		name:    "types disagree",
		obj:     pipeline("disagree", map[string]any{"type": "nfs", "csiParameter": map[string]any{"type": "ceph", "server": "s", "share": "/x"}}),
		wantErr: []string{"modelStorage.type and modelStorage.csiParameter.type disagree"},
	}, {
		name:         "extra csiParameter key",
		obj:          pipeline("extra-key", map[string]any{"type": "nfs", "csiParameter": map[string]any{"server": "s", "share": "/x", "mountPermissions": "0755"}}),
		wantWarnings: []string{"spec.modelStorage.csiParameter[mountPermissions] is not used by nfs storage and is ignored"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.take()
			_, err := c.Resource(pipelinesV1beta1).Create(ctx, tc.obj, strict)
			warnings := strings.Join(c.take(), "\n")
			t.Logf("error: %v\nwarnings: %s", err, warnings)
			if err == nil {
				t.Cleanup(func() {
					_ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), tc.obj.GetName(), metav1.DeleteOptions{})
				})
			}
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != nil && !apierrors.IsInvalid(err):
				t.Fatalf("error %v; want Invalid with %q", err, tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, w := range tc.wantWarnings {
				if !strings.Contains(warnings, w) {
					t.Errorf("warnings %q do not contain %q", warnings, w)
				}
			}
		})
	}
}

// Reads of one Pipeline through v1 and v1beta1 agree, whichever version it
// was written in; a v1 change of a Pipeline written as v1beta1 is seen in
// v1beta1.
func TestPipelineVersionsAgree(t *testing.T) {
	setup(t)
	ctx := context.Background()

	v1Obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "distri-infer.ndsl.cn/v1", "kind": "Pipeline",
		"metadata": map[string]any{"name": "written-as-v1"},
		"spec": map[string]any{
			"steps":        []any{map[string]any{"model": "m", "image": "nginx:1.27", "nodeNames": []any{"a", "b"}, "replicas": int64(2)}},
			"modelStorage": map[string]any{"nfs": map[string]any{"server": "nfs.example.com", "path": "/models"}},
		},
	}}
	if _, err := dyn.Resource(pipelinesV1).Create(ctx, v1Obj, strict); err != nil {
		t.Fatalf("creating through v1: %v", err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), "written-as-v1", metav1.DeleteOptions{})
	})
	beta := getPipelineV1beta1(t, "written-as-v1")
	ms := beta.Spec.ModelStorage
	if ms.Type != pipelinev1beta1.StorageTypeNFS || ms.NFSServer() != "nfs.example.com" || ms.NFSShare() != "/models" ||
		strings.Join(beta.Spec.Steps[0].Locations, ",") != "a,b" || *beta.Spec.Steps[0].Replicas != 2 || beta.Spec.ListenPort != 9080 {
		t.Errorf("v1beta1 read of a v1 Pipeline: %+v", beta.Spec)
	}
	one := getPipelineV1(t, "written-as-v1")
	if len(one.Annotations) != 0 || strings.Join(one.Spec.Steps[0].NodeNames, ",") != "a,b" || one.Spec.ModelStorage.NFS.Path != "/models" {
		t.Errorf("v1 read back: annotations %v, spec %+v", one.Annotations, one.Spec)
	}
	checkVersionsAgree(t, "written-as-v1")

	// The notes' form, changed through v1: the change shows in v1beta1.
	notes := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "distri-infer.ndsl.cn/v1beta1", "kind": "Pipeline",
		"metadata": map[string]any{"name": "written-as-v1beta1"},
		"spec": map[string]any{
			"steps":        []any{map[string]any{"model": "m", "image": "nginx:1.27", "location": "a"}},
			"modelStorage": map[string]any{"csiParameter": map[string]any{"type": "nfs", "server": "s", "share": "/x"}},
		},
	}}
	if _, err := dyn.Resource(pipelinesV1beta1).Create(ctx, notes, strict); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), "written-as-v1beta1", metav1.DeleteOptions{})
	})
	if _, err := dyn.Resource(pipelinesV1).Patch(ctx, "written-as-v1beta1", types.MergePatchType,
		[]byte(`{"spec":{"modelStorage":{"nfs":{"server":"t"}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching through v1: %v", err)
	}
	beta = getPipelineV1beta1(t, "written-as-v1beta1")
	if beta.Spec.ModelStorage.NFSServer() != "t" || beta.Spec.ModelStorage.NFSShare() != "/x" || beta.Spec.ModelStorage.EffectiveType() != "nfs" {
		t.Errorf("after a v1 patch, v1beta1 modelStorage = %+v", beta.Spec.ModelStorage)
	}
	if len(beta.Annotations) != 0 {
		t.Errorf("a conversion annotation reached the stored object: %v", beta.Annotations)
	}
	checkVersionsAgree(t, "written-as-v1beta1")
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
