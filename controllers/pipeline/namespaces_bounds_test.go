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
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// "*" allows every namespace but the cluster's own and the manager's; an
// explicit entry allows any of them.
func TestNamespaceAllowed(t *testing.T) {
	star := Options{DefaultNamespace: "pipeline", AllowedNamespaces: []string{AnyNamespace}, ManagerNamespace: "ndsl-system"}
	explicit := Options{DefaultNamespace: "pipeline", AllowedNamespaces: []string{AnyNamespace, "kube-system", "ndsl-system"}, ManagerNamespace: "ndsl-system"}
	for _, tc := range []struct {
		opts      Options
		namespace string
		want      bool
	}{
		{star, "pipeline", true},
		{star, "team-a", true},
		{star, "kube-system", false},
		{star, "kube-public", false},
		{star, "kube-node-lease", false},
		{star, "ndsl-system", false},
		{explicit, "kube-system", true},
		{explicit, "ndsl-system", true},
		{explicit, "kube-public", false},
		{Options{DefaultNamespace: "pipeline"}, "team-a", false},
	} {
		if got := tc.opts.namespaceAllowed(tc.namespace); got != tc.want {
			t.Errorf("%v.namespaceAllowed(%q) = %v, want %v", tc.opts.AllowedNamespaces, tc.namespace, got, tc.want)
		}
	}
}

// A Pipeline's directory is its share plus its name; two overlap when one
// is, or lies inside, the other, on path segments.
func TestDirsOverlap(t *testing.T) {
	dir := func(name, share string) string {
		p := samplePipeline()
		p.Name = name
		p.Spec.ModelStorage.CSIParameter = map[string]string{"server": "s", "share": share}
		return storageDir(p)
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{dir("team1", "/exports"), dir("a", "/exports/team1"), true},
		{dir("a", "/exports/team1"), dir("team1", "/exports/"), true},
		{dir("a", "/exports/team1/a/models"), dir("a", "/exports/team1"), true},
		{dir("a", "/exports/x/../team1"), dir("team1", "/exports"), true},
		{dir("a", "/exports"), dir("b", "/exports"), false},
		{dir("team1", "/exports"), dir("a", "/exports/team10"), false},
		{"", dir("a", "/exports"), false},
	} {
		if got := dirsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("dirsOverlap(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// The older Pipeline wins; a tie in creationTimestamp goes to the name.
func TestOlderPipeline(t *testing.T) {
	at := func(name string, sec int64) *pipelinev1.Pipeline {
		return &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(sec, 0))}}
	}
	if !olderPipeline(at("z", 1), at("a", 2)) || olderPipeline(at("a", 2), at("z", 1)) {
		t.Error("the earlier creationTimestamp must win")
	}
	if !olderPipeline(at("a", 1), at("b", 1)) || olderPipeline(at("b", 1), at("a", 1)) {
		t.Error("on equal timestamps the smaller name must win")
	}
}

// The webhook refuses what the controller would: a namespace outside the
// list (with "*" leaving out the system ones) and replicas over the bound,
// and lets an update keep what was stored.
func TestValidatorNamespaceAndReplicas(t *testing.T) {
	v := Validator{Options: Options{DefaultNamespace: "pipeline", AllowedNamespaces: []string{AnyNamespace}, ManagerNamespace: "ndsl-system", MaxReplicas: 10}}
	withNamespace := func(ns string) func(*pipelinev1beta1.Pipeline) {
		return func(p *pipelinev1beta1.Pipeline) { p.Spec.Namespace = ns }
	}
	withReplicas := func(n int32) func(*pipelinev1beta1.Pipeline) {
		return func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].Replicas = ptr.To(n) }
	}
	for _, tc := range []struct {
		name       string
		old        func(*pipelinev1beta1.Pipeline)
		mutate     func(*pipelinev1beta1.Pipeline)
		wantDenied string
	}{
		{name: "team namespace", mutate: withNamespace("team-a")},
		{name: "kube-system", mutate: withNamespace("kube-system"),
			wantDenied: "spec.namespace: Forbidden: namespace kube-system is not allowed for Pipelines (--pipeline-allowed-namespaces"},
		{name: "the manager's namespace", mutate: withNamespace("ndsl-system"), wantDenied: "namespace ndsl-system is not allowed"},
		{name: "update keeping kube-system", old: withNamespace("kube-system"), mutate: withNamespace("kube-system")},
		{name: "at the bound", mutate: withReplicas(10)},
		{name: "over the bound", mutate: withReplicas(11),
			wantDenied: "spec.steps[0].replicas: Forbidden: step " + samplePipeline().Spec.Steps[0].Model + " asks for 11 replicas, more than the 10 allowed (--pipeline-max-replicas)"},
		{name: "update lowering toward the bound", old: withReplicas(20), mutate: withReplicas(15)},
		{name: "update raising over the bound", old: withReplicas(11), mutate: withReplicas(12), wantDenied: "asks for 12 replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePipeline()
			p.TypeMeta = metav1.TypeMeta{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(), Kind: "Pipeline"}
			req := admissionRequest(t, p)
			tc.mutate(p)
			req.Object = rawPipeline(t, p)
			if tc.old != nil {
				old := samplePipeline()
				old.TypeMeta = p.TypeMeta
				tc.old(old)
				req.Operation, req.OldObject = admissionv1.Update, rawPipeline(t, old)
			}
			resp := v.Admit(context.Background(), req)
			switch {
			case tc.wantDenied == "" && !resp.Allowed:
				t.Fatalf("denied: %s", resp.Result.Message)
			case tc.wantDenied != "" && resp.Allowed:
				t.Fatalf("allowed; want denied with %q", tc.wantDenied)
			case tc.wantDenied != "" && !strings.Contains(resp.Result.Message, tc.wantDenied):
				t.Errorf("message %q does not contain %q", resp.Result.Message, tc.wantDenied)
			}
		})
	}
}

// A Validator told no namespace policy checks none, as empty allowlists
// allow everything.
func TestValidatorWithoutNamespacePolicy(t *testing.T) {
	p := samplePipeline()
	p.TypeMeta = metav1.TypeMeta{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(), Kind: "Pipeline"}
	p.Spec.Namespace = "team-a"
	if resp := (Validator{}).Admit(context.Background(), admissionRequest(t, p)); !resp.Allowed {
		t.Errorf("denied: %s", resp.Result.Message)
	}
}

// The controller refuses replicas over --pipeline-max-replicas, naming the
// step, and a negative bound is a bad flag.
func TestMaxReplicas(t *testing.T) {
	o := DefaultOptions()
	p := stored(samplePipeline())
	p.Spec.Steps[0].Replicas = ptr.To[int32](101)
	reason, err := o.refusal(p, o.DefaultNamespace)
	if reason != pipelinev1.ReasonTooManyReplicas || err == nil || !strings.Contains(err.Error(), "asks for 101 replicas, more than the 100 allowed (--pipeline-max-replicas)") {
		t.Errorf("refusal = %q, %v; want TooManyReplicas", reason, err)
	}
	o.MaxReplicas = 0
	if reason, err := o.refusal(p, o.DefaultNamespace); err != nil {
		t.Errorf("with no bound: refusal = %q, %v", reason, err)
	}
	o.MaxReplicas = -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--pipeline-max-replicas") {
		t.Errorf("Validate() = %v; want --pipeline-max-replicas refused", err)
	}
}

// The webhook refuses a create, or a change of storage, into another
// stored Pipeline's directory; an update that keeps the directory passes,
// and a failed list only warns. The webhook beside the admission policies
// (OverlapValidator) does the same, and nothing else.
func TestValidatorOverlap(t *testing.T) {
	stored := samplePipeline()
	stored.Name = "a"
	stored.Spec.ModelStorage.CSIParameter = map[string]string{"server": "10.0.0.1", "share": "/exports/team1"}
	list := func(context.Context) ([]pipelinev1beta1.Pipeline, error) {
		return []pipelinev1beta1.Pipeline{*stored}, nil
	}
	failingList := func(context.Context) ([]pipelinev1beta1.Pipeline, error) { return nil, context.DeadlineExceeded }
	pipelineOn := func(name, server, share string) *pipelinev1beta1.Pipeline {
		p := samplePipeline()
		p.TypeMeta = metav1.TypeMeta{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(), Kind: "Pipeline"}
		p.Name = name
		p.Spec.ModelStorage.CSIParameter = map[string]string{"server": server, "share": share}
		return p
	}
	for _, tc := range []struct {
		name       string
		v, failing webhook.AdmissionHandler
	}{
		{"Validator", Validator{ListPipelines: list}, Validator{ListPipelines: failingList}},
		{"OverlapValidator", OverlapValidator{ListPipelines: list}, OverlapValidator{ListPipelines: failingList}},
	} {
		v := tc.v
		thief := pipelineOn("team1", "nfs.example.com", "/exports")
		resp := v.Admit(context.Background(), admissionRequest(t, thief))
		const want = "spec.modelStorage.csiParameter[share]: Forbidden: the Pipeline's directory /exports/team1 on the NFS export overlaps Pipeline a's directory /exports/team1/a"
		if resp.Allowed || !strings.Contains(resp.Result.Message, want) {
			t.Errorf("%s: create into another's directory: allowed %v, %v; want denied with %q", tc.name, resp.Allowed, resp.Result, want)
		}
		if resp := v.Admit(context.Background(), admissionRequest(t, pipelineOn("b", "10.0.0.1", "/exports/team1"))); !resp.Allowed {
			t.Errorf("%s: a neighbour on the same share: denied: %s", tc.name, resp.Result.Message)
		}
		req := admissionRequest(t, thief)
		req.Operation, req.OldObject = admissionv1.Update, rawPipeline(t, thief)
		if resp := v.Admit(context.Background(), req); !resp.Allowed {
			t.Errorf("%s: an update keeping the directory: denied: %s", tc.name, resp.Result.Message)
		}
		if resp := tc.failing.Admit(context.Background(), admissionRequest(t, thief)); !resp.Allowed || len(resp.Warnings) == 0 {
			t.Errorf("%s: with a failed list: allowed %v, warnings %q; want allowed with a warning", tc.name, resp.Allowed, resp.Warnings)
		}
	}

	// Beside the policies, what they check is not checked again: an image
	// ID, which every Validator refuses, and a delete, which needs rights.
	imageID := pipelineOn("c", "10.0.0.1", "/exports/team2")
	imageID.Spec.Steps[0].Image = strings.Repeat("ab", 32)
	if resp := (Validator{}).Admit(context.Background(), admissionRequest(t, imageID)); resp.Allowed {
		t.Error("Validator admitted an image ID")
	}
	overlaps := OverlapValidator{ListPipelines: list}
	if resp := overlaps.Admit(context.Background(), admissionRequest(t, imageID)); !resp.Allowed {
		t.Errorf("OverlapValidator refused what the policies check: %s", resp.Result.Message)
	}
	del := admissionRequest(t, stored)
	del.Operation, del.Object, del.OldObject = admissionv1.Delete, runtime.RawExtension{}, rawPipeline(t, stored)
	if resp := overlaps.Admit(context.Background(), del); !resp.Allowed {
		t.Errorf("OverlapValidator refused a delete: %s", resp.Result.Message)
	}
}
