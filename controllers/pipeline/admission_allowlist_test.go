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

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

// The validator refuses an NFS export or an image outside its allowlists,
// pointing at the field and naming what is allowed, and lets an update keep
// what was already stored.
func TestValidatorAllowlists(t *testing.T) {
	v := Validator{Options: Options{AllowedNFS: []string{"192.168.20.235:/home/aiedge"}, AllowedImages: []string{"docker.io/library/nginx"}}}
	const (
		nfsAllowed   = "allowed (--pipeline-allowed-nfs): 192.168.20.235:/home/aiedge"
		imageAllowed = "allowed prefixes (--pipeline-allowed-images): docker.io/library/nginx"
	)
	export := func(server, share string) func(*pipelinev1beta1.Pipeline) {
		return func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage.CSIParameter = map[string]string{"server": server, "share": share}
		}
	}
	image := func(i int, image string) func(*pipelinev1beta1.Pipeline) {
		return func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[i].Image = image }
	}
	none := func(*pipelinev1beta1.Pipeline) {}
	cases := []struct {
		name       string
		old        func(*pipelinev1beta1.Pipeline) // nil: a create
		mutate     func(*pipelinev1beta1.Pipeline)
		wantDenied []string // nil: allowed
	}{
		{name: "the notes' sample", mutate: none},
		{name: "other server", mutate: export("10.0.0.66", "/home/aiedge"),
			wantDenied: []string{"spec.modelStorage.csiParameter[server]: Forbidden: NFS export 10.0.0.66:/home/aiedge is not allowed", nfsAllowed}},
		{name: "share beside the prefix", mutate: export("192.168.20.235", "/home/aiedge-evil"),
			wantDenied: []string{"spec.modelStorage.csiParameter[share]: Forbidden", nfsAllowed}},
		{name: "dot-dot escape", mutate: export("192.168.20.235", "/home/aiedge/../../etc"),
			wantDenied: []string{"spec.modelStorage.csiParameter[share]: Forbidden", nfsAllowed}},
		{name: "neighbour image", mutate: image(1, "nginx-evil"),
			wantDenied: []string{"spec.steps[1].image: Forbidden: image nginx-evil (docker.io/library/nginx-evil) is not allowed", imageAllowed}},
		{name: "both", mutate: func(p *pipelinev1beta1.Pipeline) { export("10.0.0.66", "/x")(p); image(0, "quay.io/x/y")(p) },
			wantDenied: []string{nfsAllowed, imageAllowed}},
		{name: "update keeping a forbidden export and image", old: func(p *pipelinev1beta1.Pipeline) { export("10.0.0.66", "/x")(p); image(0, "evil")(p) },
			mutate: func(p *pipelinev1beta1.Pipeline) {
				export("10.0.0.66", "/x")(p)
				image(1, "evil")(p)
				p.Labels = map[string]string{"a": "b"}
			}},
		{name: "update to another forbidden export", old: export("10.0.0.66", "/x"), mutate: export("10.0.0.66", "/y"),
			wantDenied: []string{nfsAllowed}},
		{name: "update to a forbidden image", old: none, mutate: image(0, "evil"), wantDenied: []string{imageAllowed}},
		// Issue 35: "sha256:<id>" read as docker.io/library/sha256:<id>
		// passed a Docker Hub allowlist and ran a cached image.
		{name: "image ID", mutate: image(0, "sha256:"+strings.Repeat("ab", 32)),
			wantDenied: []string{`spec.steps[0].image: Forbidden: image "sha256:abab`, "names no repository", imageAllowed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := samplePipeline()
			p.TypeMeta = metav1.TypeMeta{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(), Kind: "Pipeline"}
			req := admissionRequest(t, p) // replaced below; keeps the kind
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
			case tc.wantDenied == nil && !resp.Allowed:
				t.Fatalf("denied: %s", resp.Result.Message)
			case tc.wantDenied != nil && resp.Allowed:
				t.Fatalf("allowed; want denied with %q", tc.wantDenied)
			}
			for _, w := range tc.wantDenied {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, w)
				}
			}
		})
	}
	// Without lists, the validator admits every export and image.
	p := samplePipeline()
	p.TypeMeta = metav1.TypeMeta{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(), Kind: "Pipeline"}
	export("10.0.0.66", "/etc/../root")(p)
	image(0, "quay.io/x/y")(p)
	if resp := (Validator{}).Admit(context.Background(), admissionRequest(t, p)); !resp.Allowed {
		t.Errorf("without allowlists: denied: %s", resp.Result.Message)
	}
}

func rawPipeline(t *testing.T, p *pipelinev1beta1.Pipeline) runtime.RawExtension {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}
