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

package pipeline

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// samplePipeline is the v1beta1 sample of the design notes, as the API
// server defaults it.
func samplePipeline() *pipelinev1beta1.Pipeline {
	return &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "facedetection-pipeline", UID: "p-uid", Generation: 1},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps: []pipelinev1beta1.PipelineStep{{
				Image: "nginx:latest", Location: "xx-test-node236", Model: "facedetection-1",
				Replicas: ptr.To[int32](1), Args: map[string]string{"listenPort": "9080"},
			}, {
				Image: "nginx:latest", Location: "xx-test-node239", Model: "facedetection-2",
				Replicas: ptr.To[int32](1), Args: map[string]string{},
			}},
			ListenPort: 9080,
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"},
				Size:         ptr.To(resource.MustParse("10Gi")),
			},
		},
	}
}

// stored is p as the controller reads it: converted to v1, the stored
// version, as the API server has the conversion webhook do.
func stored(p *pipelinev1beta1.Pipeline) *pipelinev1.Pipeline {
	out := &pipelinev1.Pipeline{}
	if err := conversion.V1beta1ToV1(p, out); err != nil {
		panic(err)
	}
	return out
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

// The controller (v1) and the webhook (v1beta1) put the children in the
// same namespace.
func TestTargetNamespace(t *testing.T) {
	p := samplePipeline()
	if got, v1 := targetNamespace(p, "pipeline"), childNamespace(stored(p), "pipeline"); got != "pipeline" || v1 != got {
		t.Errorf("without spec.namespace: %q (v1 %q), want the default", got, v1)
	}
	p.Spec.Namespace = "inference"
	if got, v1 := targetNamespace(p, "pipeline"), childNamespace(stored(p), "pipeline"); got != "inference" || v1 != got {
		t.Errorf("with spec.namespace: %q (v1 %q), want inference", got, v1)
	}
}

func TestDesiredDeployments(t *testing.T) {
	first, second := StepName("facedetection-pipeline", "facedetection-1"), StepName("facedetection-pipeline", "facedetection-2")
	cases := []struct {
		name      string
		mutate    func(p *pipelinev1beta1.Pipeline)
		step      int
		wantName  string
		wantEnv   map[string]string
		wantArgs  []string
		wantNodes []string // nil: no affinity
		wantRepl  int32
	}{{
		name: "first step begins and sends to the second", step: 0,
		wantName: first,
		wantEnv: map[string]string{
			EnvModelPath: "/data/facedetection-1", EnvListenPort: "9080", EnvBegin: "true",
			EnvDST: second + ".ns.svc:9080",
		},
		wantArgs: []string{"--listenPort=9080"}, wantNodes: []string{"xx-test-node236"}, wantRepl: 1,
	}, {
		name: "last step sends back to the first", step: 1,
		wantName: second,
		wantEnv: map[string]string{
			EnvModelPath: "/data/facedetection-2", EnvListenPort: "9080",
			EnvDST: first + ".ns.svc:9080",
		},
		wantArgs: []string{}, wantNodes: []string{"xx-test-node239"}, wantRepl: 1,
	}, {
		name: "v1 form: locations merged with location, replicas, listen port, sorted args",
		mutate: func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ListenPort = 8000
			s := &p.Spec.Steps[0]
			s.Locations = []string{"node-b", "xx-test-node236", "node-c"}
			s.Replicas = ptr.To[int32](3)
			s.Args = map[string]string{"z": "1", "a": "x=y", "m": ""}
		},
		step:     0,
		wantName: first,
		wantEnv: map[string]string{
			EnvModelPath: "/data/facedetection-1", EnvListenPort: "8000", EnvBegin: "true",
			EnvDST: second + ".ns.svc:8000",
		},
		wantArgs:  []string{"--a=x=y", "--m=", "--z=1"},
		wantNodes: []string{"xx-test-node236", "node-b", "node-c"}, wantRepl: 3,
	}, {
		name:   "no location: no affinity; replicas unset: not set, left to others (an HPA)",
		mutate: func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[1].Location = ""; p.Spec.Steps[1].Replicas = nil },
		step:   1, wantName: second,
		wantEnv: map[string]string{
			EnvModelPath: "/data/facedetection-2", EnvListenPort: "9080",
			EnvDST: first + ".ns.svc:9080",
		},
		wantArgs: []string{}, wantRepl: -1,
	}, {
		name: "a single step sends to itself",
		mutate: func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Steps = p.Spec.Steps[:1]
		},
		step: 0, wantName: first,
		wantEnv: map[string]string{
			EnvModelPath: "/data/facedetection-1", EnvListenPort: "9080", EnvBegin: "true",
			EnvDST: first + ".ns.svc:9080",
		},
		wantArgs: []string{"--listenPort=9080"}, wantNodes: []string{"xx-test-node236"}, wantRepl: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := samplePipeline()
			if tc.mutate != nil {
				tc.mutate(in)
			}
			p := stored(in)
			d := mustTyped[appsv1.Deployment](desiredDeployment(p, "ns", tc.step, PodSecurityBaseline))
			if d.Name != tc.wantName || d.Namespace != "ns" {
				t.Errorf("name = %s/%s, want ns/%s", d.Namespace, d.Name, tc.wantName)
			}
			if !metav1.IsControlledBy(d, p) {
				t.Error("Deployment is not controlled by the Pipeline")
			}
			ref := metav1.GetControllerOf(d)
			if ref.APIVersion != "distri-infer.ndsl.cn/v1" || ref.Kind != "Pipeline" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
				t.Errorf("owner reference = %+v", ref)
			}
			// The pods carry only labels the manager derives; the
			// Deployment adds the Pipeline's name, which lists it.
			wantPodLabels := map[string]string{
				LabelStep: []string{"1", "2"}[tc.step], LabelStepChild: tc.wantName,
				controller.ManagedByLabel: controller.ManagedByValue,
			}
			wantLabels := map[string]string{LabelPipeline: p.Name}
			for k, v := range wantPodLabels {
				wantLabels[k] = v
			}
			if fmt.Sprint(d.Labels) != fmt.Sprint(wantLabels) || fmt.Sprint(d.Spec.Template.Labels) != fmt.Sprint(wantPodLabels) {
				t.Errorf("labels %v (pods %v), want %v (pods %v)", d.Labels, d.Spec.Template.Labels, wantLabels, wantPodLabels)
			}
			wantAnnotations := map[string]string{AnnotationPipeline: p.Name, AnnotationModel: p.Spec.Steps[tc.step].Model}
			if fmt.Sprint(d.Spec.Template.Annotations) != fmt.Sprint(wantAnnotations) {
				t.Errorf("pod annotations %v, want %v", d.Spec.Template.Annotations, wantAnnotations)
			}
			// Only this manager writes the selector's label; the step's
			// position is not in it, as it changes on reorder.
			if sel := d.Spec.Selector.MatchLabels; len(sel) != 1 || sel[LabelStepChild] != tc.wantName || len(d.Spec.Selector.MatchExpressions) != 0 {
				t.Errorf("selector = %+v, want %s=%s only", d.Spec.Selector, LabelStepChild, tc.wantName)
			}
			if got := ptr.Deref(d.Spec.Replicas, -1); got != tc.wantRepl {
				t.Errorf("replicas = %d, want %d", got, tc.wantRepl)
			}
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			if c.Image != "docker.io/library/"+p.Spec.Steps[tc.step].Image {
				t.Errorf("image = %q", c.Image)
			}
			if got := envMap(c.Env); len(got) != len(tc.wantEnv) {
				t.Errorf("env = %v, want %v", got, tc.wantEnv)
			} else {
				for k, v := range tc.wantEnv {
					if got[k] != v {
						t.Errorf("env %s = %q, want %q", k, got[k], v)
					}
				}
			}
			if strings.Join(c.Args, " ") != strings.Join(tc.wantArgs, " ") || len(c.Args) != len(tc.wantArgs) {
				t.Errorf("args = %q, want %q", c.Args, tc.wantArgs)
			}
			if len(c.Ports) != 1 || c.Ports[0].ContainerPort != listenPort(p) || c.Ports[0].Protocol != corev1.ProtocolTCP {
				t.Errorf("ports = %+v", c.Ports)
			}
			if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/data" || c.VolumeMounts[0].Name != pod.Volumes[0].Name {
				t.Errorf("mounts = %+v", c.VolumeMounts)
			}
			if claim := pod.Volumes[0].PersistentVolumeClaim; claim == nil || claim.ClaimName != storageName(p, "ns") {
				t.Errorf("volume = %+v, want the claim %s", pod.Volumes[0], storageName(p, "ns"))
			}
			if tc.wantNodes == nil {
				if pod.Affinity != nil {
					t.Errorf("affinity = %+v, want none", pod.Affinity)
				}
				return
			}
			terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			expr := terms[0].MatchExpressions[0]
			if len(terms) != 1 || expr.Key != "kubernetes.io/hostname" || expr.Operator != corev1.NodeSelectorOpIn ||
				strings.Join(expr.Values, ",") != strings.Join(tc.wantNodes, ",") {
				t.Errorf("node affinity = %+v, want hostname In %v", terms, tc.wantNodes)
			}
		})
	}
}

func TestDesiredService(t *testing.T) {
	p := stored(samplePipeline())
	p.Spec.ListenPort = 7000
	s := mustTyped[corev1.Service](desiredService(p, "ns", 1))
	d := mustTyped[appsv1.Deployment](desiredDeployment(p, "ns", 1, PodSecurityBaseline))
	if s.Name != d.Name || s.Namespace != "ns" {
		t.Errorf("Service %s/%s, want the Deployment's name %s", s.Namespace, s.Name, d.Name)
	}
	if !metav1.IsControlledBy(s, p) || s.Labels[LabelStep] != "2" || s.Labels[LabelPipeline] != p.Name {
		t.Errorf("metadata = %+v", s.ObjectMeta)
	}
	if len(s.Spec.Selector) != 1 || s.Spec.Selector[LabelStepChild] != d.Name || d.Spec.Template.Labels[LabelStepChild] != d.Name {
		t.Errorf("selector = %v, want %s=%s, the step's pods", s.Spec.Selector, LabelStepChild, d.Name)
	}
	if _, ok := s.Labels["app.kubernetes.io/instance"]; ok {
		t.Errorf("labels = %v: app.kubernetes.io/instance is Helm's and Argo CD's", s.Labels)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 7000 || s.Spec.Ports[0].TargetPort.IntValue() != 7000 {
		t.Errorf("ports = %+v, want 7000 -> 7000", s.Spec.Ports)
	}
}

func TestDesiredStorage(t *testing.T) {
	p := stored(samplePipeline())
	pv := mustTyped[corev1.PersistentVolume](desiredPersistentVolume(p, "ns", "claim-uid"))
	pvc := mustTyped[corev1.PersistentVolumeClaim](desiredPersistentVolumeClaim(p, "ns"))
	if pv.Name != pvc.Name || pvc.Namespace != "ns" || pv.Namespace != "" {
		t.Fatalf("PV %q, PVC %s/%s: want one name, the claim in ns", pv.Name, pvc.Namespace, pvc.Name)
	}
	if !strings.HasPrefix(pv.Name, "facedetection-pipeline-models-") {
		t.Errorf("PV name = %q", pv.Name)
	}
	if !metav1.IsControlledBy(pv, p) || !metav1.IsControlledBy(pvc, p) {
		t.Error("storage is not controlled by the Pipeline")
	}
	for _, l := range []map[string]string{pv.Labels, pvc.Labels} {
		if _, ok := l["app.kubernetes.io/instance"]; ok || l[LabelPipeline] != p.Name {
			t.Errorf("storage labels = %v: want the pipeline label, and no app.kubernetes.io/instance", l)
		}
	}
	csi := pv.Spec.CSI
	if csi == nil || csi.Driver != "nfs.csi.k8s.io" ||
		csi.VolumeAttributes["server"] != "192.168.20.235" || csi.VolumeAttributes["share"] != "/home/aiedge/csiTest" ||
		csi.VolumeAttributes["subDir"] != p.Name ||
		csi.VolumeHandle != "192.168.20.235#/home/aiedge/csiTest#facedetection-pipeline#"+pv.Name {
		t.Errorf("csi = %+v", csi)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
		len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != corev1.ReadWriteMany ||
		pv.Spec.StorageClassName != "" {
		t.Errorf("PV spec = %+v", pv.Spec)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "10Gi" {
		t.Errorf("capacity = %s", q.String())
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != "ns" || ref.Name != pvc.Name || ref.UID != "claim-uid" {
		t.Errorf("claimRef = %+v, want the claim, by UID", ref)
	}
	if pvc.Spec.VolumeName != pv.Name || ptr.Deref(pvc.Spec.StorageClassName, "nil") != "" ||
		len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("PVC spec = %+v", pvc.Spec)
	}
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "10Gi" {
		t.Errorf("request = %s", q.String())
	}

	// Everything the volume's immutable source depends on renames it.
	for name, mutate := range map[string]func(p *pipelinev1.Pipeline, ns *string){
		"namespace": func(_ *pipelinev1.Pipeline, ns *string) { *ns = "other" },
		"server":    func(p *pipelinev1.Pipeline, _ *string) { p.Spec.ModelStorage.NFS.Server = "10.0.0.1" },
		"path":      func(p *pipelinev1.Pipeline, _ *string) { p.Spec.ModelStorage.NFS.Path = "/other" },
		"size": func(p *pipelinev1.Pipeline, _ *string) {
			p.Spec.ModelStorage.Size = ptr.To(resource.MustParse("20Gi"))
		},
	} {
		changed, ns := stored(samplePipeline()), "ns"
		mutate(changed, &ns)
		if storageName(changed, ns) == pv.Name {
			t.Errorf("changing the %s keeps the storage name %s", name, pv.Name)
		}
	}
	// The default size and an explicit 10Gi are the same volume.
	unset := stored(samplePipeline())
	unset.Spec.ModelStorage.Size = nil
	if storageName(unset, "ns") != pv.Name {
		t.Error("the defaulted size renames the volume")
	}
}

func TestStepNames(t *testing.T) {
	long := strings.Repeat("a", 200) + ".example.com" // 212 characters
	longest := strings.Repeat("p", 253)               // the longest Pipeline name
	cases := []struct {
		pipeline, model string
		prefix          string // the readable part before the hash
	}{
		{"facedetection-pipeline", "facedetection-1", "facedetection-pipeline-facedetection-1"},
		// Both were a-b-c, once.
		{"a-b", "c", "a-b-c"},
		{"a", "b-c", "a-b-c"},
		{"1st", "m", "p1st-m"}, // a DNS-1035 label starts with a letter
		{"a.b", "m", "a-b-m"},  // and has no dots
		{"a-b", "m", "a-b-m"},  // so a.b and a-b must still differ
		{long, "model", long[:49]},
		{long, "model2", long[:49]},
		{longest, strings.Repeat("m", 63), longest[:49]},
		{longest[:252], strings.Repeat("m", 63), longest[:49]},
		{"p", strings.Repeat("m", 63), "p-" + strings.Repeat("m", 47)},
		{"x-------------------------------------------------y", "m", "x"}, // trailing dashes of the cut go
	}
	seen := map[string]string{}
	for _, tc := range cases {
		name := StepName(tc.pipeline, tc.model)
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			t.Errorf("StepName(%q, %q) = %q: %v", tc.pipeline, tc.model, name, errs)
		}
		if prefix, hash, _ := strings.Cut(strings.TrimPrefix(name, tc.prefix), "-"); prefix != "" || len(hash) != stepHashLen || !strings.HasPrefix(name, tc.prefix+"-") {
			t.Errorf("StepName(%q, %q) = %q, want %q, a dash and %d characters of hash", tc.pipeline, tc.model, name, tc.prefix, stepHashLen)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%q and %q share the name %q", other, tc.pipeline+"/"+tc.model, name)
		}
		seen[name] = tc.pipeline + "/" + tc.model
		if StepName(tc.pipeline, tc.model) != name {
			t.Error("StepName is not deterministic")
		}
	}
	// Pinned: a change renames every child of every Pipeline, which the
	// controller then migrates.
	if got, want := StepName("facedetection-pipeline", "facedetection-1"), "facedetection-pipeline-facedetection-1-vamwphfulfe2i"; got != want {
		t.Errorf("StepName of the sample = %q, want %q", got, want)
	}
}

// Every split of every short name into a Pipeline name and a model gives
// a name of its own.
func TestStepNamesOfEverySplitDiffer(t *testing.T) {
	var words []string
	var grow func(w string)
	grow = func(w string) {
		if len(w) > 0 && w[len(w)-1] != '-' {
			words = append(words, w)
		}
		if len(w) == 8 {
			return
		}
		for _, c := range []string{"a", "b", "-", "."} {
			if len(w) == 0 && (c == "-" || c == ".") {
				continue
			}
			grow(w + c)
		}
	}
	grow("")
	seen := map[string]string{}
	for _, w := range words {
		for i := 1; i < len(w)-1; i++ {
			if w[i] != '-' {
				continue
			}
			pipelineName, model := w[:i], w[i+1:]
			if strings.Contains(model, ".") || model[0] == '-' {
				continue // not a model the API accepts
			}
			name := StepName(pipelineName, model)
			if other, dup := seen[name]; dup {
				t.Fatalf("%s and %s/%s share the name %s", other, pipelineName, model, name)
			}
			seen[name] = pipelineName + "/" + model
		}
	}
	if len(seen) < 10000 {
		t.Fatalf("only %d pairs tried", len(seen))
	}
}

func TestStorageAndLabelValues(t *testing.T) {
	long := strings.Repeat("a", 200) + ".example.com"
	for _, name := range []string{"facedetection-pipeline", "1st", "a.b", long} {
		p := stored(samplePipeline())
		p.Name = name
		storage := storageName(p, "some-namespace")
		if errs := validation.IsDNS1035Label(storage); len(errs) > 0 {
			t.Errorf("storageName(%q) = %q: %v", name, storage, errs)
		}
		if errs := validation.IsValidLabelValue(pipelineLabelValue(p.Name)); len(errs) > 0 {
			t.Errorf("pipelineLabelValue(%q) = %q: %v", p.Name, pipelineLabelValue(p.Name), errs)
		}
	}
	if pipelineLabelValue("short") != "short" {
		t.Error("a short name is not its own label value")
	}
	if pipelineLabelValue(long) == pipelineLabelValue(long+"x") {
		t.Error("long names that differ share a label value")
	}
}

func TestPipelineNodes(t *testing.T) {
	in := samplePipeline()
	in.Spec.Steps[1].Locations = []string{"xx-test-node236", "node-x", ""}
	got := strings.Join(pipelineNodes(stored(in)), ",")
	if got != "xx-test-node236,xx-test-node239,node-x" {
		t.Errorf("pipelineNodes = %s", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil || o.Workers != 5 || o.DefaultNamespace != "pipeline" {
		t.Fatalf("defaults %+v: %v", o, err)
	}
	for _, bad := range []Options{{DefaultNamespace: "x", MaxReplicas: -1}, {DefaultNamespace: "Not_A_Namespace"}, {}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// Existing children keep their names and sources when the controller moves
// from v1beta1 to v1: the values are what the v1beta1 controller computed
// for the design notes' sample (with locations beside location).
func TestNamesAsTheV1beta1ControllerHadThem(t *testing.T) {
	in := samplePipeline()
	in.Spec.Steps[1].Locations = []string{"xx-test-node236", "node-x", ""}
	p := stored(in)
	const storage = "facedetection-pipeline-models-ea1188399c6bd6cf"
	if got := storageName(p, "ns"); got != storage {
		t.Errorf("storageName = %s, want %s", got, storage)
	}
	pv := mustTyped[corev1.PersistentVolume](desiredPersistentVolume(p, "ns", "claim-uid"))
	if got, want := pv.Spec.CSI.VolumeHandle, "192.168.20.235#/home/aiedge/csiTest#facedetection-pipeline#"+storage; got != want {
		t.Errorf("volume handle = %s, want %s", got, want)
	}
	d := mustTyped[appsv1.Deployment](desiredDeployment(p, "ns", 1, PodSecurityBaseline))
	nodes := d.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values
	if got := strings.Join(nodes, ","); got != "xx-test-node239,xx-test-node236,node-x" {
		t.Errorf("step 2's nodes = %s, want xx-test-node239,xx-test-node236,node-x", got)
	}
}
