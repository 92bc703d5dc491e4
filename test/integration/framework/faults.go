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

package framework

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// ConflictInjector answers some requests with the 409 Conflict the API
// server sends when the object changed since the client read it: what a
// controller whose cache is behind gets.
type ConflictInjector struct {
	match    func(*http.Request) bool
	left     atomic.Int32
	injected atomic.Int32
}

// InjectConflicts returns a copy of cfg whose first n requests that match
// get a conflict instead of reaching the API server.
func InjectConflicts(cfg *rest.Config, n int, match func(*http.Request) bool) (*rest.Config, *ConflictInjector) {
	inj := &ConflictInjector{match: match}
	inj.left.Store(int32(n))
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if inj.match(req) && inj.left.Add(-1) >= 0 {
				inj.injected.Add(1)
				return conflictResponse(req)
			}
			return rt.RoundTrip(req)
		})
	})
	return out, inj
}

// Arm makes the next n matching requests get a conflict.
func (i *ConflictInjector) Arm(n int) { i.left.Store(int32(n)) }

// Stop ends the injection: every later request reaches the API server.
func (i *ConflictInjector) Stop() { i.left.Store(0) }

// Injected is how many conflicts were sent so far.
func (i *ConflictInjector) Injected() int { return int(i.injected.Load()) }

// IsApplyOf matches server-side applies to a path ending in suffix, such as
// "/deployments/web".
func IsApplyOf(suffix string) func(*http.Request) bool {
	return func(req *http.Request) bool {
		return req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, suffix) &&
			strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch")
	}
}

// IsCreateOf matches creates in a collection whose path ends in suffix,
// such as "/namespaces/shop/deployments".
func IsCreateOf(suffix string) func(*http.Request) bool {
	return func(req *http.Request) bool {
		return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, suffix)
	}
}

func conflictResponse(req *http.Request) (*http.Response, error) {
	parts := strings.Split(req.URL.Path, "/")
	name := parts[len(parts)-1]
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  fmt.Sprintf("Operation cannot be fulfilled on %q: the object has been modified; please apply your changes to the latest version and try again", name),
		Reason:   metav1.StatusReasonConflict,
		Details:  &metav1.StatusDetails{Name: name},
		Code:     http.StatusConflict,
	}
	body, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusConflict,
		Status:     "409 Conflict",
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    req,
	}, nil
}
