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

package webhook

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// reviewer answers each SubjectAccessReview with decide and records it.
func reviewer(decide func(*authorizationv1.SubjectAccessReview) (bool, error)) (*AccessReviewer, *[]authorizationv1.SubjectAccessReviewSpec) {
	var asked []authorizationv1.SubjectAccessReviewSpec
	c := fake.NewClientset()
	c.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		asked = append(asked, review.Spec)
		allowed, err := decide(review)
		if err != nil {
			return true, nil, err
		}
		out := review.DeepCopy()
		out.Status.Allowed = allowed
		return true, out, nil
	})
	return &AccessReviewer{Client: c.AuthorizationV1().SubjectAccessReviews()}, &asked
}

func TestAccessReviewerRefusals(t *testing.T) {
	user := authenticationv1.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"team-a", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x"}}}
	path := field.NewPath("spec", "namespace")
	deploy := Action{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "team-b"}
	svc := Action{Verb: "create", Resource: "services", Namespace: "team-b"}

	r, asked := reviewer(func(s *authorizationv1.SubjectAccessReview) (bool, error) {
		return s.Spec.ResourceAttributes.Resource == "services", nil
	})
	errs := r.Refusals(context.Background(), user, path, deploy, svc)
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeForbidden || errs[0].Field != "spec.namespace" ||
		!strings.Contains(errs[0].Error(), `user "alice" may not create deployments.apps in namespace "team-b"`) {
		t.Errorf("refusals %v, want one Forbidden at spec.namespace naming alice, create, deployments.apps and team-b", errs)
	}
	want := authorizationv1.SubjectAccessReviewSpec{User: "alice", UID: "u-1", Groups: user.Groups,
		Extra:              map[string]authorizationv1.ExtraValue{"scopes": {"x"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-b", Verb: "create", Group: "apps", Resource: "deployments"}}
	if len(*asked) != 2 || !reflect.DeepEqual((*asked)[0], want) {
		t.Errorf("reviews %+v, want two, the first %+v", *asked, want)
	}

	// A review that fails refuses, says so, and stops the checks.
	r, asked = reviewer(func(*authorizationv1.SubjectAccessReview) (bool, error) {
		return false, errors.New("connection refused")
	})
	errs = r.Refusals(context.Background(), user, path, deploy, svc)
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal ||
		!strings.Contains(errs[0].Error(), `could not check whether user "alice" may create deployments.apps in namespace "team-b", so the request is refused: the SubjectAccessReview failed: connection refused`) {
		t.Errorf("refusals %v, want one internal error saying the review failed", errs)
	}
	if len(*asked) != 1 {
		t.Errorf("%d reviews after a failure, want 1", len(*asked))
	}

	var none *AccessReviewer
	if errs := none.Refusals(context.Background(), user, path, deploy); errs != nil {
		t.Errorf("a nil reviewer refused: %v", errs)
	}
}
