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
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Options say how the API server is asked and how long its answers hold.
type Options struct {
	// Open paths are served to anyone, without a token: the kubelet probes
	// them without one. Exact paths.
	Open []string
	// Timeout of one review request.
	Timeout time.Duration
	// Backoff retries reviews that could not reach the API server.
	Backoff wait.Backoff
	// TokenTTL keeps an authenticated token's user; a rejected token is
	// asked about again after RejectedTokenTTL.
	TokenTTL, RejectedTokenTTL time.Duration
	// AllowTTL and DenyTTL keep SubjectAccessReview answers.
	AllowTTL, DenyTTL time.Duration
}

// filter is the handler in front of the protected one.
type filter struct {
	next   http.Handler
	open   []string
	tokens authenticator.Token
	access *accessReviewer
}

// New returns next behind a TokenReview (no or a bad token: 401) and a
// SubjectAccessReview of the lower-case HTTP method on the URL path, as
// kube-apiserver names a non-resource request (denied: 403).
func New(next http.Handler, client kubernetes.Interface, o Options) http.Handler {
	reviewer := &tokenReviewer{reviews: client.AuthenticationV1().TokenReviews(), backoff: o.Backoff, timeout: o.Timeout}
	return &filter{
		next:   next,
		open:   slices.Clone(o.Open),
		tokens: tokencache.New(reviewer, false, o.TokenTTL, o.RejectedTokenTTL),
		access: &accessReviewer{
			reviews:  client.AuthorizationV1().SubjectAccessReviews(),
			backoff:  o.Backoff,
			timeout:  o.Timeout,
			allowTTL: o.AllowTTL,
			denyTTL:  o.DenyTTL,
			answers:  cache.NewLRUExpireCache(answersKept),
		},
	}
}

func (f *filter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if slices.Contains(f.open, r.URL.Path) {
		f.next.ServeHTTP(w, r)
		return
	}
	logger := klog.FromContext(r.Context())
	token, ok := bearerToken(r)
	if !ok {
		http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
		return
	}
	resp, ok, err := f.tokens.AuthenticateToken(r.Context(), token)
	if err != nil {
		logger.V(2).Info("Token not authenticated", "path", r.URL.Path, "err", err)
	}
	if err != nil || !ok {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	verb := strings.ToLower(r.Method)
	v, err := f.access.allowed(r.Context(), resp.User, verb, r.URL.Path)
	if err != nil {
		logger.Error(err, "Could not authorize a request", "user", resp.User.GetName(), "path", r.URL.Path)
		http.Error(w, "Internal Server Error: the request could not be authorized", http.StatusInternalServerError)
		return
	}
	if !v.allowed {
		msg := fmt.Sprintf("Forbidden: user %q cannot %s path %q", resp.User.GetName(), verb, r.URL.Path)
		if v.reason != "" {
			msg += ": " + v.reason
		}
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	f.next.ServeHTTP(w, r)
}

// bearerToken is the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
