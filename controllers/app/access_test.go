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

package app

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// grantsReviewer allows exactly the grants, each "verb resource namespace"
// (resource with its group), and records what it was asked.
func grantsReviewer(grants ...string) (*webhook.AccessReviewer, *[]string) {
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
		review.Status.Allowed = slices.Contains(grants, grant)
		return true, review, nil
	})
	return &webhook.AccessReviewer{Client: c.AuthorizationV1().SubjectAccessReviews()}, &asked
}

func TestValidatorRequesterRights(t *testing.T) {
	all := []string{"create deployments.apps default", "create services default", "create ingresses.networking.k8s.io default"}
	cases := []struct {
		name       string
		op         admissionv1.Operation
		app, old   *appv1beta1.App
		grants     []string
		wantDenied []string
		wantAsked  []string
	}{{
		name: "create with every child, all allowed", app: betaApp("web", true, true, nil), grants: all, wantAsked: all,
	}, {
		name: "create without a Service asks only for the Deployment", app: betaApp("web", false, false, nil), grants: all[:1], wantAsked: all[:1],
	}, {
		name: "create without the rights", app: betaApp("web", true, true, nil), grants: all[:1],
		wantDenied: []string{
			`spec.enable_service: Forbidden: user "alice" may not create services in namespace "default"`,
			`spec.enable_ingress: Forbidden: user "alice" may not create ingresses.networking.k8s.io in namespace "default"`,
		},
	}, {
		name: "create without the right to create Deployments", app: betaApp("web", false, false, nil),
		wantDenied: []string{`metadata.namespace: Forbidden: user "alice" may not create deployments.apps in namespace "default"`},
	}, {
		name: "update turning the Ingress on", op: admissionv1.Update, app: betaApp("web", true, true, nil), old: betaApp("web", true, false, nil),
		grants: all[:2], wantDenied: []string{`user "alice" may not create ingresses.networking.k8s.io`},
		wantAsked: []string{"create ingresses.networking.k8s.io default"},
	}, {
		name: "update that turns nothing on asks nothing", op: admissionv1.Update, app: betaApp("web", true, false, nil), old: betaApp("web", true, true, nil),
		wantAsked: []string{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			var old runtime.Object
			if tc.old != nil {
				old = tc.old
			}
			req := request(t, op, "v1beta1", tc.app, old)
			req.UserInfo = authenticationv1.UserInfo{Username: "alice"}
			access, asked := grantsReviewer(tc.grants...)
			resp := Validator{Access: access}.Admit(context.Background(), req)
			if tc.wantDenied == nil && !resp.Allowed {
				t.Fatalf("denied: %s", resp.Result.Message)
			}
			if tc.wantDenied != nil {
				if resp.Allowed {
					t.Fatalf("allowed; want denied with %q", tc.wantDenied)
				}
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
