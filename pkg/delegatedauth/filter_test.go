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

package delegatedauth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fakeAPIServer knows one token, "reader-token" of user "reader", who may
// GET /metrics and nothing else; it fails the first failures reviews of each
// kind with err.
type fakeAPIServer struct {
	tokenReviews, accessReviews atomic.Int32
	failures                    int32
	err                         error
}

func (s *fakeAPIServer) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if s.tokenReviews.Add(1) <= s.failures {
			return true, nil, s.err
		}
		review := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if review.Spec.Token == "reader-token" {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "reader", Groups: []string{"system:authenticated"}}}
		}
		return true, review, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if s.accessReviews.Add(1) <= s.failures {
			return true, nil, s.err
		}
		review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		attrs := review.Spec.NonResourceAttributes
		review.Status.Allowed = review.Spec.User == "reader" && attrs != nil && attrs.Path == "/metrics" && attrs.Verb == "get"
		if !review.Status.Allowed {
			review.Status.Reason = "no RBAC policy matched"
		}
		return true, review, nil
	})
	return c
}

func testOptions() Options {
	return Options{
		Open:     []string{"/healthz", "/readyz"},
		Timeout:  time.Second,
		Backoff:  wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3},
		TokenTTL: time.Minute, RejectedTokenTTL: time.Minute,
		AllowTTL: time.Minute, DenyTTL: time.Minute,
	}
}

func serve(h http.Handler, method, path, token string) int {
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func TestFilter(t *testing.T) {
	s := &fakeAPIServer{}
	h := New(ok, s.client(), testOptions())
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"a probe without a token", "GET", "/readyz", "", 200},
		{"a probe with a bad token", "GET", "/healthz", "bad", 200},
		{"a probe's sub-path", "GET", "/readyz/informer-sync", "", 401},
		{"no token", "GET", "/metrics", "", 401},
		{"an unknown token", "GET", "/metrics", "bad", 401},
		{"allowed", "GET", "/metrics", "reader-token", 200},
		{"another path", "GET", "/debug/controllers", "reader-token", 403},
		{"another verb", "POST", "/metrics", "reader-token", 403},
	} {
		if got := serve(h, tc.method, tc.path, tc.token); got != tc.want {
			t.Errorf("%s: %s %s = %d, want %d", tc.name, tc.method, tc.path, got, tc.want)
		}
	}
}

// Answers are remembered: scraping again costs the API server nothing.
func TestFilterCachesAnswers(t *testing.T) {
	s := &fakeAPIServer{}
	h := New(ok, s.client(), testOptions())
	for range 5 {
		if got := serve(h, "GET", "/metrics", "reader-token"); got != 200 {
			t.Fatalf("GET /metrics = %d, want 200", got)
		}
		if got := serve(h, "GET", "/debug/controllers", "reader-token"); got != 403 {
			t.Fatalf("GET /debug/controllers = %d, want 403", got)
		}
		if got := serve(h, "GET", "/metrics", "bad"); got != 401 {
			t.Fatalf("GET /metrics with a bad token = %d, want 401", got)
		}
	}
	if n := s.tokenReviews.Load(); n != 2 {
		t.Errorf("%d TokenReviews for 2 tokens asked about 5 times each, want 2", n)
	}
	if n := s.accessReviews.Load(); n != 2 {
		t.Errorf("%d SubjectAccessReviews for 2 paths asked about 5 times each, want 2", n)
	}
}

// An API server that cannot answer for a moment is asked again; one that
// refuses is not.
func TestFilterRetriesOnlyTransientFailures(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("starting")
	s := &fakeAPIServer{failures: 2, err: unavailable}
	if got := serve(New(ok, s.client(), testOptions()), "GET", "/metrics", "reader-token"); got != 200 {
		t.Errorf("GET /metrics after 2 unavailable answers of each review = %d, want 200", got)
	}
	s = &fakeAPIServer{failures: 2, err: errors.New("connection refused")}
	if got := serve(New(ok, s.client(), testOptions()), "GET", "/metrics", "reader-token"); got != 200 {
		t.Errorf("GET /metrics after 2 refused connections = %d, want 200", got)
	}

	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no"))
	s = &fakeAPIServer{failures: 10, err: forbidden}
	if got := serve(New(ok, s.client(), testOptions()), "GET", "/metrics", "reader-token"); got != 401 {
		t.Errorf("GET /metrics when the manager may not review tokens = %d, want 401", got)
	}
	if n := s.tokenReviews.Load(); n != 1 {
		t.Errorf("%d TokenReviews refused with 403, want 1: a refusal is not retried", n)
	}

	s = &fakeAPIServer{failures: 10, err: unavailable}
	if got := serve(New(ok, s.client(), testOptions()), "GET", "/metrics", "reader-token"); got != 401 {
		t.Errorf("GET /metrics while the API server is unavailable = %d, want 401", got)
	}
	if n := s.tokenReviews.Load(); n != 3 {
		t.Errorf("%d TokenReviews while unavailable, want 3: the backoff's steps", n)
	}
}
