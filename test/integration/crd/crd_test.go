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

// Package crd tests the generated CustomResourceDefinitions against a real
// kube-apiserver: the samples in manifests/samples are accepted and
// defaulted, and invalid objects are rejected with the OpenAPI or CEL
// message their markers promise.
package crd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	appapply "github.com/ndsl/controller-manager/pkg/generated/applyconfiguration/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// namespace holds the Apps; kube-apiserver creates it at startup.
const namespace = "default"

var (
	appsGVR             = appv1beta1.SchemeGroupVersion.WithResource("apps")
	pipelinesV1beta1GVR = pipelinev1beta1.SchemeGroupVersion.WithResource("pipelines")
	pipelinesV1GVR      = pipelinev1.SchemeGroupVersion.WithResource("pipelines")
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}

// clients are what the tests talk to the API server with.
type clients struct {
	typed   versioned.Interface
	dynamic dynamic.Interface
}

// TestCRDs installs the CRDs once and runs every case against them.
func TestCRDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if err := framework.InstallCRDs(ctx, cp.Config); err != nil {
		t.Fatal(err)
	}
	typed, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := clients{typed: typed, dynamic: dyn}
	waitServed(ctx, t, c.dynamic, appsGVR, pipelinesV1beta1GVR, pipelinesV1GVR)

	t.Run("AppSample", func(t *testing.T) { testAppSample(ctx, t, c) })
	t.Run("AppApplyKeepsZeroReplicas", func(t *testing.T) { testAppApply(ctx, t, c) })
	t.Run("PipelineV1beta1Sample", func(t *testing.T) { testPipelineV1beta1Sample(ctx, t, c) })
	t.Run("PipelineNotesSample", func(t *testing.T) { testPipelineNotesSample(ctx, t, c) })
	t.Run("PipelineV1Sample", func(t *testing.T) { testPipelineV1Sample(ctx, t, c) })
	t.Run("PipelineStatusAndColumns", func(t *testing.T) { testPipelineStatusAndColumns(ctx, t, c) })
	t.Run("V1beta1Deprecated", func(t *testing.T) { testV1beta1Deprecated(ctx, t) })
	t.Run("InvalidApps", func(t *testing.T) { testInvalidApps(ctx, t, c) })
	t.Run("InvalidPipelines", func(t *testing.T) { testInvalidPipelines(ctx, t, c) })
	t.Run("CategoriesAndShortNames", func(t *testing.T) { testCategoriesAndShortNames(t) })
}

// Issue 21, item 6: as discovery shows them to kubectl, neither kind is in
// the category all (kubectl delete all --all would delete Apps, and through
// the garbage collector their children), and the category and short names
// clash with no popular project's (Argo CD owns app and apps, Tekton
// pipelines).
func testCategoriesAndShortNames(t *testing.T) {
	want := map[schema.GroupVersionResource][]string{appsGVR: {"exapp"}, pipelinesV1beta1GVR: {"dip"}}
	for gvr, shortNames := range want {
		list, err := cp.Client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range list.APIResources {
			if r.Name != gvr.Resource {
				continue
			}
			found = true
			if !slices.Equal(r.Categories, []string{"ndsl"}) {
				t.Errorf("%s: categories %v, want [ndsl] (never all)", gvr, r.Categories)
			}
			if !slices.Equal(r.ShortNames, shortNames) {
				t.Errorf("%s: short names %v, want %v", gvr, r.ShortNames, shortNames)
			}
		}
		if !found {
			t.Errorf("%s not in discovery", gvr)
		}
	}
}

// TestStorageVersions: each CRD of these files serves only the version it
// stores, v1 for Apps and Pipelines alike: they have no conversion, and another version without it reads relabelled data and
// drops fields on writes. manifests/default patches in the conversion
// webhook and serves the other version (test/integration/manifests and
// test/integration/webhooks test it).
func TestStorageVersions(t *testing.T) {
	for file, want := range map[string]string{"ingress.example.com_apps.yaml": "v1", "distri-infer.ndsl.cn_pipelines.yaml": "v1"} {
		crd := readCRD(t, file)
		served, storage := map[string]bool{}, ""
		for _, v := range crd.Spec.Versions {
			served[v.Name] = v.Served
			if v.Storage {
				storage = v.Name
			}
		}
		if storage != want || len(crd.Spec.Versions) != 2 || !served[want] || served[otherVersion(want)] {
			t.Errorf("%s: storage %q, served %v; want %s stored and served alone", file, storage, served, want)
		}
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
			t.Errorf("%s: conversion %+v; the webhook is manifests/default's", file, crd.Spec.Conversion)
		}
	}
}

// The design notes' Pipeline CR applies with strict field validation, as
// kubectl sends it: csiParameter a string map holding the type, and the
// stray spec.status kept.
func testPipelineNotesSample(ctx context.Context, t *testing.T, c clients) {
	sample := readSample(t, "design-notes/pipeline-v1beta1.yaml")
	sample.SetName("notes")
	if _, err := c.dynamic.Resource(pipelinesV1beta1GVR).Create(ctx, sample, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Fatalf("creating the notes' Pipeline sample: %v", err)
	}
	t.Cleanup(func() { deletePipeline(t, c, "notes") })
	p, err := c.typed.PipelineV1beta1().Pipelines().Get(ctx, "notes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms := p.Spec.ModelStorage
	if ms.EffectiveType() != pipelinev1beta1.StorageTypeNFS || ms.NFSServer() != "192.168.20.235" || ms.NFSShare() != "/home/aiedge/csiTest" {
		t.Errorf("modelStorage = %s", toJSON(ms))
	}
	if p.Spec.Status == nil || string(p.Spec.Status.Raw) != `{"phase":"failed"}` {
		t.Errorf("spec.status = %v, want kept as written", p.Spec.Status)
	}
}

func testAppSample(ctx context.Context, t *testing.T, c clients) {
	sample := readSample(t, "app.yaml")
	if _, err := c.dynamic.Resource(appsGVR).Namespace(namespace).Create(ctx, sample, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the App sample: %v", err)
	}
	app, err := c.typed.AppV1beta1().Apps(namespace).Get(ctx, sample.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := appv1beta1.AppSpec{
		Image:         "nginx:latest",
		Replicas:      ptr.To[int32](3),
		EnableService: true,
		EnableIngress: false,
		Port:          80, // defaulted
	}
	if !apiequality.Semantic.DeepEqual(app.Spec, want) {
		t.Errorf("spec = %+v, want %+v", app.Spec, want)
	}
}

// testAppApply creates an App with server-side apply through the generated
// apply configurations, without replicas and then with replicas 0.
func testAppApply(ctx context.Context, t *testing.T, c clients) {
	apps := c.typed.AppV1beta1().Apps(namespace)
	opts := metav1.ApplyOptions{FieldManager: "crd-test", Force: true}
	app, err := apps.Apply(ctx, appapply.App("applied", namespace).WithSpec(appapply.AppSpec().WithImage("nginx:latest")), opts)
	if err != nil {
		t.Fatalf("applying an App: %v", err)
	}
	// Unset stays unset: the controller then leaves the Deployment's
	// replicas to whoever scales it.
	if app.Spec.Replicas != nil {
		t.Errorf("replicas = %d, want unset: the CRD has no default", *app.Spec.Replicas)
	}
	app, err = apps.Apply(ctx, appapply.App("applied", namespace).WithSpec(appapply.AppSpec().WithImage("nginx:latest").WithReplicas(0)), opts)
	if err != nil {
		t.Fatalf("applying an App with replicas 0: %v", err)
	}
	if got := ptr.Deref(app.Spec.Replicas, -1); got != 0 {
		t.Errorf("replicas = %d after applying 0, want 0", got)
	}
}

func testPipelineV1beta1Sample(ctx context.Context, t *testing.T, c clients) {
	sample := readSample(t, "pipeline-v1beta1.yaml")
	if _, err := c.dynamic.Resource(pipelinesV1beta1GVR).Create(ctx, sample, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the v1beta1 Pipeline sample: %v", err)
	}
	t.Cleanup(func() { deletePipeline(t, c, sample.GetName()) })

	p, err := c.typed.PipelineV1beta1().Pipelines().Get(ctx, sample.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := pipelinev1beta1.PipelineSpec{
		Steps: []pipelinev1beta1.PipelineStep{{
			Model:    "facedetection-1",
			Image:    "nginx:latest",
			Location: "xx-test-node236", // replicas not defaulted: unset, they are the scaler's
			Args:     map[string]string{"listenPort": "9080"},
		}, {
			Model:    "facedetection-2",
			Image:    "nginx:latest",
			Location: "xx-test-node239", // replicas not defaulted: unset, they are the scaler's
			Args:     map[string]string{},
		}},
		ListenPort: 9080, // defaulted
		ModelStorage: pipelinev1beta1.ModelStorage{
			Type:         pipelinev1beta1.StorageTypeNFS,
			CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"},
			Size:         ptr.To(resource.MustParse("10Gi")), // defaulted
		},
	}
	if !apiequality.Semantic.DeepEqual(p.Spec, want) {
		t.Errorf("spec = %s, want %s", toJSON(p.Spec), toJSON(want))
	}

}

// testPipelineV1Sample: the v1 schema accepts and defaults the v1 sample.
// test/integration/webhooks reads both versions through the webhook.
func testPipelineV1Sample(ctx context.Context, t *testing.T, c clients) {
	sample := readSample(t, "pipeline-v1.yaml")
	if _, err := c.dynamic.Resource(pipelinesV1GVR).Create(ctx, sample, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}); err != nil {
		t.Fatalf("creating the v1 Pipeline sample: %v", err)
	}
	t.Cleanup(func() { deletePipeline(t, c, sample.GetName()) })

	u, err := c.dynamic.Resource(pipelinesV1GVR).Get(ctx, sample.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p pipelinev1.Pipeline
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Steps) != 2 {
		t.Fatalf("steps = %s, want 2", toJSON(p.Spec.Steps))
	}
	for _, s := range p.Spec.Steps {
		if got := ptr.Deref(s.Replicas, -1); got != 2 {
			t.Errorf("step %s replicas = %d, want 2", s.Model, got)
		}
	}
	if p.Spec.ListenPort != 9080 {
		t.Errorf("listenPort = %d, want 9080", p.Spec.ListenPort)
	}
	if got := p.Spec.ModelStorage.Size; got == nil || got.Cmp(resource.MustParse("10Gi")) != 0 {
		t.Errorf("modelStorage.size = %v, want the default 10Gi", got)
	}
}

// testPipelineStatusAndColumns writes status through the status subresource
// and reads the printer columns back as kubectl would.
func testPipelineStatusAndColumns(ctx context.Context, t *testing.T, c clients) {
	pipelines := c.typed.PipelineV1beta1().Pipelines()
	p := &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "status-columns"},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps: []pipelinev1beta1.PipelineStep{{Model: "m", Image: "nginx:latest"}},
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "nfs.example", "share": "/models"},
			},
		},
	}
	p, err := pipelines.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a Pipeline: %v", err)
	}
	t.Cleanup(func() { deletePipeline(t, c, p.Name) })

	p.Status = pipelinev1beta1.PipelineStatus{
		ObservedGeneration: p.Generation,
		Phase:              pipelinev1beta1.PhaseRunning,
		Models:             "m",
		StepCount:          1,
		Conditions: []metav1.Condition{{
			Type: pipelinev1beta1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: pipelinev1beta1.ReasonReady, LastTransitionTime: metav1.Now(),
		}},
		Steps:   []pipelinev1beta1.StepStatus{{Model: "m", DeploymentName: "m", ServiceName: "m", Replicas: 1, ReadyReplicas: 1}},
		Storage: &pipelinev1beta1.StorageStatus{PVName: "pv", PVPhase: "Bound", PVCName: "pvc", PVCPhase: "Bound"},
		DetailPhase: &pipelinev1beta1.DetailPhase{PVPhase: "Bound", PVCPhase: "Bound",
			StepsPhase: []pipelinev1beta1.StepPhase{{Model: "m", DeploymentPhase: pipelinev1beta1.DeploymentPhase("Running")}}},
	}
	if _, err := pipelines.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the status: %v", err)
	}

	raw, err := c.typed.PipelineV1beta1().RESTClient().Get().Resource("pipelines").Name(p.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatalf("getting the Pipeline as a table: %v", err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, col := range table.ColumnDefinitions {
		names = append(names, col.Name)
	}
	// The design notes' columns: Steps.model, Phase and DetailPhase.
	if got, want := strings.Join(names, ","), "Name,Steps.model,Phase,DetailPhase,Ready,Age"; got != want {
		t.Fatalf("columns = %s, want %s", got, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows = %d, want 1", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if got := fmt.Sprintln(cells[0], cells[1], cells[2], cells[4]); got != "status-columns m Running True\n" {
		t.Errorf("cells = %s, want status-columns m Running True", got)
	}
	if got := fmt.Sprint(cells[3]); !strings.Contains(got, `"deploymentPhase":"Running"`) || !strings.Contains(got, `"pvPhase":"Bound"`) {
		t.Errorf("DetailPhase cell = %s, want the detailPhase with pvPhase and each step's deploymentPhase", got)
	}
}

// v1beta1 is deprecated in favour of v1 (issue 23): every v1beta1 request
// answers with a warning that names the version to use; v1 requests do not.
func testV1beta1Deprecated(ctx context.Context, t *testing.T) {
	warnings := &recordedWarnings{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandlerWithContext = warnings
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{appsGVR, pipelinesV1beta1GVR} {
		warnings.reset()
		if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s/%s", gvr.Group, gvr.Version)
		if got := warnings.all(); !strings.Contains(got, want+" ") || !strings.Contains(got, "deprecated") || !strings.Contains(got, gvr.Group+"/v1,") {
			t.Errorf("listing %s warned %q, want a deprecation naming %s and %s/v1", gvr.Resource, got, want, gvr.Group)
		}
	}
	warnings.reset()
	if _, err := dyn.Resource(pipelinesV1GVR).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if got := warnings.all(); got != "" {
		t.Errorf("listing v1 Pipelines warned %q, want no warning", got)
	}
}

// recordedWarnings keeps the API server's warnings of a client.
type recordedWarnings struct {
	mu   sync.Mutex
	text []string
}

func (w *recordedWarnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *recordedWarnings) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = nil
}

func (w *recordedWarnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.text, "; ")
}

// invalidCase is an object that the API server must reject.
type invalidCase struct {
	name   string
	mutate func(obj map[string]any)
	// want are substrings of the rejection message: the field and the reason.
	want []string
}

func testInvalidApps(ctx context.Context, t *testing.T, c clients) {
	cases := []invalidCase{{
		name:   "ingress without service",
		mutate: setField(true, "spec", "enable_ingress").and(setField(false, "spec", "enable_service")),
		want:   []string{"spec:", "enable_ingress requires enable_service"},
	}, {
		name:   "ingress with service left to its default",
		mutate: setField(true, "spec", "enable_ingress").and(removeField("spec", "enable_service")),
		want:   []string{"spec:", "enable_ingress requires enable_service"},
	}, {
		name:   "name not a DNS-1035 label",
		mutate: setField("web.v2", "metadata", "name"),
		want:   []string{"metadata.name must be a DNS-1035 label"},
	}, {
		name:   "empty image",
		mutate: setField("", "spec", "image"),
		want:   []string{"spec.image", "should be at least 1 chars long"},
	}, {
		name:   "no image",
		mutate: removeField("spec", "image"),
		want:   []string{"spec.image", "Required value"},
	}, {
		name:   "negative replicas",
		mutate: setField(int64(-1), "spec", "replicas"),
		want:   []string{"spec.replicas", "should be greater than or equal to 0"},
	}, {
		name:   "port 0",
		mutate: setField(int64(0), "spec", "port"),
		want:   []string{"spec.port", "should be greater than or equal to 1"},
	}, {
		name:   "port above 65535",
		mutate: setField(int64(65536), "spec", "port"),
		want:   []string{"spec.port", "should be less than or equal to 65535"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := readSample(t, "app.yaml")
			obj.SetName("invalid")
			tc.mutate(obj.Object)
			_, err := c.dynamic.Resource(appsGVR).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{})
			expectInvalid(t, err, tc.want...)
		})
	}
}

func testInvalidPipelines(ctx context.Context, t *testing.T, c clients) {
	cases := []invalidCase{{
		name:   "duplicate models",
		mutate: setField("facedetection-1", "spec", "steps", 1, "model"),
		want:   []string{"spec.steps", "step models must be unique"},
	}, {
		name:   "empty steps",
		mutate: setField([]any{}, "spec", "steps"),
		want:   []string{"spec.steps", "should have at least 1 items"},
	}, {
		name:   "no steps",
		mutate: removeField("spec", "steps"),
		want:   []string{"spec.steps", "Required value"},
	}, {
		name:   "model not a DNS label",
		mutate: setField("Face_Detection", "spec", "steps", 0, "model"),
		want:   []string{"spec.steps[0].model", "should match"},
	}, {
		name:   "step without image",
		mutate: removeField("spec", "steps", 0, "image"),
		want:   []string{"spec.steps[0].image", "Required value"},
	}, {
		name:   "negative step replicas",
		mutate: setField(int64(-1), "spec", "steps", 0, "replicas"),
		want:   []string{"spec.steps[0].replicas", "should be greater than or equal to 0"},
	}, {
		name:   "listenPort 0",
		mutate: setField(int64(0), "spec", "listenPort"),
		want:   []string{"spec.listenPort", "should be greater than or equal to 1"},
	}, {
		name:   "namespace not a DNS label",
		mutate: setField("Not.A.Label", "spec", "namespace"),
		want:   []string{"spec.namespace", "should match"},
	}, {
		name:   "no modelStorage",
		mutate: removeField("spec", "modelStorage"),
		want:   []string{"spec.modelStorage", "Required value"},
	}, {
		// A bound on steps per Pipeline (issue 35, item 8).
		name:   "65 steps",
		mutate: setField(manySteps(65), "spec", "steps"),
		want:   []string{"spec.steps", "must have at most 64 items"},
	}}
	nfsRule := "modelStorage of type nfs requires csiParameter.server and csiParameter.share"
	v1beta1Cases := []invalidCase{{
		name:   "nfs without server",
		mutate: removeField("spec", "modelStorage", "csiParameter", "server"),
		want:   []string{"spec.modelStorage", nfsRule},
	}, {
		name:   "nfs with empty share",
		mutate: setField("", "spec", "modelStorage", "csiParameter", "share"),
		want:   []string{"spec.modelStorage", nfsRule},
	}, {
		name:   "nfs without csiParameter",
		mutate: removeField("spec", "modelStorage", "csiParameter"),
		want:   []string{"spec.modelStorage", nfsRule},
	}, {
		name:   "storage type ceph",
		mutate: setField("ceph", "spec", "modelStorage", "type"),
		want:   []string{"spec.modelStorage.type", `Unsupported value: "ceph"`},
	}, {
		name:   "no storage type anywhere",
		mutate: removeField("spec", "modelStorage", "type"),
		want:   []string{"spec.modelStorage", "modelStorage needs a type"},
	}, {
		name:   "storage type ceph inside csiParameter",
		mutate: removeField("spec", "modelStorage", "type").and(setField("ceph", "spec", "modelStorage", "csiParameter", "type")),
		want:   []string{"spec.modelStorage", "modelStorage.csiParameter.type must be nfs"},
	}, {
		name:   "types beside and inside disagree",
		mutate: setField("NFS", "spec", "modelStorage", "csiParameter", "type"),
		want:   []string{"spec.modelStorage", "modelStorage.type and modelStorage.csiParameter.type disagree"},
	}}
	v1Cases := []invalidCase{{
		name:   "nfs without server",
		mutate: removeField("spec", "modelStorage", "nfs", "server"),
		want:   []string{"spec.modelStorage.nfs.server", "Required value"},
	}, {
		name:   "nfs with empty path",
		mutate: setField("", "spec", "modelStorage", "nfs", "path"),
		want:   []string{"spec.modelStorage.nfs.path", "should be at least 1 chars long"},
	}, {
		name:   "no nfs",
		mutate: removeField("spec", "modelStorage", "nfs"),
		want:   []string{"spec.modelStorage.nfs", "Required value"},
	}}
	for _, version := range []struct {
		sample string
		gvr    schema.GroupVersionResource
		cases  []invalidCase
	}{{"pipeline-v1beta1.yaml", pipelinesV1beta1GVR, v1beta1Cases}, {"pipeline-v1.yaml", pipelinesV1GVR, v1Cases}} {
		for _, tc := range append(append([]invalidCase(nil), cases...), version.cases...) {
			t.Run(version.gvr.Version+"/"+tc.name, func(t *testing.T) {
				obj := readSample(t, version.sample)
				obj.SetName("invalid")
				tc.mutate(obj.Object)
				_, err := c.dynamic.Resource(version.gvr).Create(ctx, obj, metav1.CreateOptions{})
				expectInvalid(t, err, tc.want...)
			})
		}
	}
}

// expectInvalid fails unless err is an Invalid error whose message contains
// every one of want.
func expectInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejected with %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error %v is not Invalid", err)
	}
	t.Logf("rejected: %v", err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// mutation changes an unstructured object in place.
type mutation func(obj map[string]any)

// and runs m, then next.
func (m mutation) and(next mutation) mutation {
	return func(obj map[string]any) { m(obj); next(obj) }
}

// setField sets the field at path (map keys and slice indexes) to value.
// manySteps is n steps with distinct models.
func manySteps(n int) []any {
	steps := make([]any, n)
	for i := range steps {
		steps[i] = map[string]any{"model": fmt.Sprintf("m%d", i), "image": "nginx:1.27"}
	}
	return steps
}

func setField(value any, path ...any) mutation {
	return func(obj map[string]any) {
		parent, last := walk(obj, path)
		switch p := parent.(type) {
		case map[string]any:
			p[last.(string)] = value
		case []any:
			p[last.(int)] = value
		}
	}
}

// removeField deletes the map entry at path.
func removeField(path ...any) mutation {
	return func(obj map[string]any) {
		parent, last := walk(obj, path)
		delete(parent.(map[string]any), last.(string))
	}
}

// walk returns the container of the last element of path, and that element.
func walk(obj map[string]any, path []any) (any, any) {
	var cur any = obj
	for _, step := range path[:len(path)-1] {
		switch s := step.(type) {
		case string:
			cur = cur.(map[string]any)[s]
		case int:
			cur = cur.([]any)[s]
		}
	}
	return cur, path[len(path)-1]
}

func otherVersion(v string) string {
	if v == "v1" {
		return "v1beta1"
	}
	return "v1"
}

// waitServed waits until every resource can be listed: a CRD is served a
// moment after it is established.
func waitServed(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvrs ...schema.GroupVersionResource) {
	t.Helper()
	for _, gvr := range gvrs {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("waiting for %s to be served: %v", gvr, err)
		}
	}
}

// deletePipeline deletes a Pipeline and waits until it is gone, so that a
// later test can reuse its name.
func deletePipeline(t *testing.T, c clients, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pipelines := c.typed.PipelineV1beta1().Pipelines()
	if err := pipelines.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Pipeline %s: %v", name, err)
		return
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := pipelines.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("waiting for Pipeline %s to be gone: %v", name, err)
	}
}

func readCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(readFile(t, "manifests", "crd", file), &crd); err != nil {
		t.Fatalf("parsing %s: %v", file, err)
	}
	return &crd
}

// readSample returns a sample from manifests/samples exactly as written.
func readSample(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := yaml.YAMLToJSON(readFile(t, "manifests", "samples", file))
	if err != nil {
		t.Fatalf("parsing %s: %v", file, err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(b); err != nil { // integers stay int64
		t.Fatalf("parsing %s: %v", file, err)
	}
	return obj
}

func readFile(t *testing.T, path ...string) []byte {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(append([]string{root}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
