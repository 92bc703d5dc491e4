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
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

func admissionRequest(t *testing.T, obj runtime.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return &admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: data},
	}
}

func TestValidator(t *testing.T) {
	storage := func(typ string, csi map[string]string) func(*pipelinev1beta1.Pipeline) {
		return func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage.Type = pipelinev1beta1.StorageType(typ)
			p.Spec.ModelStorage.CSIParameter = csi
		}
	}
	cases := []struct {
		name   string
		mutate func(*pipelinev1beta1.Pipeline)
		// wantDenied are substrings of the denial; nil means allowed.
		wantDenied   []string
		wantWarnings []string
	}{
		{name: "type beside", mutate: storage("nfs", map[string]string{"server": "s", "share": "/x"})},
		{name: "type inside, as the notes", mutate: storage("", map[string]string{"server": "s", "share": "/x", "type": "nfs"})},
		{name: "type in both places, agreeing", mutate: storage("nfs", map[string]string{"server": "s", "share": "/x", "type": "nfs"})},
		{name: "no type", mutate: storage("", map[string]string{"server": "s", "share": "/x"}),
			wantDenied: []string{"spec.modelStorage.type: Required value", "modelStorage.csiParameter.type"}},
		{name: "types disagree", mutate: storage("nfs", map[string]string{"server": "s", "share": "/x", "type": "ceph"}),
			wantDenied: []string{"spec.modelStorage.csiParameter[type]", "disagrees with modelStorage.type"}},
		{name: "unsupported type inside", mutate: storage("", map[string]string{"server": "s", "share": "/x", "type": "ceph"}),
			wantDenied: []string{"spec.modelStorage.csiParameter[type]", `Unsupported value: "ceph"`}},
		{name: "nfs without server", mutate: storage("", map[string]string{"share": "/x", "type": "nfs"}),
			wantDenied: []string{"spec.modelStorage.csiParameter[server]: Required value", "NFS server"}},
		{name: "nfs with an empty share", mutate: storage("nfs", map[string]string{"server": "s", "share": ""}),
			wantDenied: []string{"spec.modelStorage.csiParameter[share]: Required value", "exported path"}},
		{name: "nfs without csiParameter", mutate: storage("nfs", nil),
			wantDenied: []string{"csiParameter[server]: Required value", "csiParameter[share]: Required value"}},
		{name: "stray spec.status", mutate: func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Status = &runtime.RawExtension{Raw: []byte(`{"phase":"failed"}`)}
		}, wantWarnings: []string{`spec.status is not part of the Pipeline spec and is ignored (it is {"phase":"failed"})`}},
		{name: "extra csiParameter keys", mutate: storage("nfs", map[string]string{"server": "s", "share": "/x", "mountPermissions": "0", "a": "b"}),
			wantWarnings: []string{"spec.modelStorage.csiParameter[a] is not used", "spec.modelStorage.csiParameter[mountPermissions] is not used"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePipeline()
			p.TypeMeta = metav1.TypeMeta{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(), Kind: "Pipeline"}
			tc.mutate(p)
			resp := Validator{}.Admit(context.Background(), admissionRequest(t, p))
			if tc.wantDenied == nil && !resp.Allowed {
				t.Fatalf("denied: %s", resp.Result.Message)
			}
			if tc.wantDenied != nil {
				if resp.Allowed {
					t.Fatalf("allowed; want denied with %q", tc.wantDenied)
				}
				t.Logf("denied: %s", resp.Result.Message)
				for _, w := range tc.wantDenied {
					if !strings.Contains(resp.Result.Message, w) {
						t.Errorf("message %q does not contain %q", resp.Result.Message, w)
					}
				}
			}
			warnings := strings.Join(resp.Warnings, "\n")
			for _, w := range tc.wantWarnings {
				if !strings.Contains(warnings, w) {
					t.Errorf("warnings %q do not contain %q", warnings, w)
				}
			}
			if len(tc.wantWarnings) == 0 && warnings != "" {
				t.Errorf("warnings %q, want none", warnings)
			}
		})
	}
}

// A v1 Pipeline reaches the same rules through the conversion.
func TestValidatorReadsV1(t *testing.T) {
	p := &pipelinev1.Pipeline{
		TypeMeta:   metav1.TypeMeta{APIVersion: pipelinev1.SchemeGroupVersion.String(), Kind: "Pipeline"},
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: pipelinev1.PipelineSpec{
			Steps:        []pipelinev1.PipelineStep{{Model: "m", Image: "nginx:1.27"}},
			ModelStorage: pipelinev1.ModelStorage{NFS: &pipelinev1.NFSStorage{Server: "", Path: "/x"}},
		},
	}
	resp := Validator{}.Admit(context.Background(), admissionRequest(t, p))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "csiParameter[server]: Required value") {
		t.Errorf("allowed %v, result %v; want denied for the server", resp.Allowed, resp.Result)
	}
}
