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
	"errors"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// grantsReviewer allows exactly the grants, each "verb resource namespace"
// (resource with its group, as in "deployments.apps"), and records what it
// was asked in the same form; err fails every review.
func grantsReviewer(err error, grants ...string) (*webhook.AccessReviewer, *[]string) {
	var asked []string
	c := fake.NewClientset()
	c.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		attrs := review.Spec.ResourceAttributes
		resource := attrs.Resource
		if attrs.Group != "" {
			resource += "." + attrs.Group
		}
		grant := attrs.Verb + " " + resource + " " + attrs.Namespace
		asked = append(asked, grant)
		if err != nil {
			return true, nil, err
		}
		review.Status.Allowed = slices.Contains(grants, grant)
		return true, review, nil
	})
	return &webhook.AccessReviewer{Client: c.AuthorizationV1().SubjectAccessReviews()}, &asked
}

// authorIn is what the built-in edit role grants in ns, as far as the
// Pipeline's children go.
func authorIn(ns string) []string {
	return []string{"create deployments.apps " + ns, "create services " + ns, "create persistentvolumeclaims " + ns, "delete deployments.apps " + ns}
}

func accessRequest(t *testing.T, op admissionv1.Operation, p, old *pipelinev1beta1.Pipeline) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(p *pipelinev1beta1.Pipeline) runtime.RawExtension {
		if p == nil {
			return runtime.RawExtension{}
		}
		p = p.DeepCopy()
		p.TypeMeta = metav1.TypeMeta{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(), Kind: "Pipeline"}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	return &admissionv1.AdmissionRequest{
		UID: "uid", Operation: op, Name: "facedetection-pipeline",
		Kind:     metav1.GroupVersionKind{Group: pipelinev1beta1.GroupName, Version: "v1beta1", Kind: "Pipeline"},
		UserInfo: authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
		Object:   raw(p), OldObject: raw(old),
	}
}

func TestValidatorRequesterRights(t *testing.T) {
	inNamespace := func(ns string) *pipelinev1beta1.Pipeline {
		p := samplePipeline()
		p.Spec.Namespace = ns
		return p
	}
	reimaged := inNamespace("team-b")
	reimaged.Spec.Steps[0].Image = "registry.example.com/team-a/steal:1"
	relabelled := inNamespace("team-b")
	relabelled.Labels = map[string]string{"owner": "alice"}

	cases := []struct {
		name     string
		op       admissionv1.Operation
		p, old   *pipelinev1beta1.Pipeline
		grants   []string
		reviewEr error
		// wantDenied are substrings of the denial; nil means allowed.
		wantDenied []string
		// wantAsked are the reviews, in order.
		wantAsked []string
	}{{
		name: "create in a namespace of the author's", op: admissionv1.Create, p: inNamespace("team-a"), grants: authorIn("team-a"),
		wantAsked: []string{"create deployments.apps team-a", "create services team-a", "create persistentvolumeclaims team-a"},
	}, {
		name: "create in another team's namespace", op: admissionv1.Create, p: inNamespace("team-b"), grants: authorIn("team-a"),
		wantDenied: []string{
			`spec.namespace: Forbidden: user "alice" may not create deployments.apps in namespace "team-b"`,
			`user "alice" may not create services in namespace "team-b"`,
			`user "alice" may not create persistentvolumeclaims in namespace "team-b"`,
		},
	}, {
		name: "create without spec.namespace is checked in the default namespace", op: admissionv1.Create, p: inNamespace(""), grants: authorIn("team-a"),
		wantDenied: []string{`user "alice" may not create deployments.apps in namespace "pipeline"`},
	}, {
		name: "with only some of the rights", op: admissionv1.Create, p: inNamespace("team-a"), grants: []string{"create deployments.apps team-a", "create services team-a"},
		wantDenied: []string{`user "alice" may not create persistentvolumeclaims in namespace "team-a"`},
	}, {
		name: "re-image another team's Pipeline", op: admissionv1.Update, p: reimaged, old: inNamespace("team-b"), grants: authorIn("team-a"),
		wantDenied: []string{`user "alice" may not create deployments.apps in namespace "team-b"`},
	}, {
		name: "relabel another team's Pipeline: metadata needs nothing", op: admissionv1.Update, p: relabelled, old: inNamespace("team-b"),
	}, {
		name: "move another team's Pipeline into the author's namespace", op: admissionv1.Update, p: inNamespace("team-a"), old: inNamespace("team-b"), grants: authorIn("team-a"),
		wantDenied: []string{`user "alice" may not create deployments.apps in namespace "team-b"`},
		wantAsked: []string{"create deployments.apps team-a", "create services team-a", "create persistentvolumeclaims team-a",
			"create deployments.apps team-b", "create services team-b", "create persistentvolumeclaims team-b"},
	}, {
		name: "move between two namespaces of the author's", op: admissionv1.Update, p: inNamespace("team-a"), old: inNamespace("team-a2"),
		grants: append(authorIn("team-a"), authorIn("team-a2")...),
	}, {
		name: "delete in a namespace of the author's", op: admissionv1.Delete, old: inNamespace("team-a"), grants: authorIn("team-a"),
		wantAsked: []string{"delete deployments.apps team-a"},
	}, {
		name: "delete another team's Pipeline", op: admissionv1.Delete, old: inNamespace("team-b"), grants: authorIn("team-a"),
		wantDenied: []string{`Pipeline "facedetection-pipeline" cannot be deleted: spec.namespace: Forbidden: user "alice" may not delete deployments.apps in namespace "team-b"`},
	}, {
		name: "a review that fails refuses", op: admissionv1.Create, p: inNamespace("team-a"), grants: authorIn("team-a"), reviewEr: errors.New("connection refused"),
		wantDenied: []string{`spec.namespace: Internal error: could not check whether user "alice" may create deployments.apps in namespace "team-a", so the request is refused: the SubjectAccessReview failed: connection refused`},
		wantAsked:  []string{"create deployments.apps team-a"},
	}, {
		name: "a delete whose review fails is refused", op: admissionv1.Delete, old: inNamespace("team-a"), grants: authorIn("team-a"), reviewEr: errors.New("timeout"),
		wantDenied: []string{"the SubjectAccessReview failed: timeout"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			access, asked := grantsReviewer(tc.reviewEr, tc.grants...)
			v := Validator{Options: Options{DefaultNamespace: "pipeline", AllowedNamespaces: []string{AnyNamespace}}, Access: access}
			resp := v.Admit(context.Background(), accessRequest(t, tc.op, tc.p, tc.old))
			if tc.wantDenied == nil && !resp.Allowed {
				t.Fatalf("denied: %s", resp.Result.Message)
			}
			if tc.wantDenied != nil {
				if resp.Allowed {
					t.Fatalf("allowed; want denied with %q", tc.wantDenied)
				}
				t.Logf("denied (%d): %s", resp.Result.Code, resp.Result.Message)
				for _, w := range tc.wantDenied {
					if !strings.Contains(resp.Result.Message, w) {
						t.Errorf("message %q does not contain %q", resp.Result.Message, w)
					}
				}
			}
			if tc.wantAsked != nil && !slices.Equal(*asked, tc.wantAsked) {
				t.Errorf("reviews %q, want %q", *asked, tc.wantAsked)
			}
		})
	}
}
