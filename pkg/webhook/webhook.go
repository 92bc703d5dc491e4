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

// Package webhook serves admission (admission.k8s.io/v1 AdmissionReview) and
// conversion (apiextensions.k8s.io/v1 ConversionReview) webhooks over plain
// net/http. The business logic of each API lives in its handler or
// converter; this package decodes and encodes the reviews, answers malformed
// requests with 400, recovers panics, and records metrics per webhook.
package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AdmissionHandler decides one request. Mutating handlers set Patch and
// PatchType (JSONPatch); see Allowed, Denied, Invalid, Errored and Patched.
type AdmissionHandler interface {
	Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

// AdmissionFunc is an AdmissionHandler made of a function.
type AdmissionFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Admit calls f.
func (f AdmissionFunc) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return f(ctx, req)
}

// Converter converts one object of a CRD to the requested apiVersion
// ("group/version"). An error fails the whole ConversionReview with that
// message, so a field is never dropped silently.
type Converter interface {
	Convert(ctx context.Context, obj *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error)
}

// ConverterFunc is a Converter made of a function.
type ConverterFunc func(ctx context.Context, obj *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error)

// Convert calls f.
func (f ConverterFunc) Convert(ctx context.Context, obj *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error) {
	return f(ctx, obj, toAPIVersion)
}

// Server routes webhook requests by path. It is an http.Handler; Serve runs
// it over TLS with a certificate that reloads without a restart.
type Server struct {
	mux *http.ServeMux

	mu    sync.Mutex
	paths map[string]string // path -> webhook name, for Paths and duplicate checks

	serving atomic.Pointer[servingState]
	// closingConnections is set by CloseConnections.
	closingConnections atomic.Bool
}

// NewServer returns a Server with no webhooks registered.
func NewServer() *Server {
	return &Server{mux: http.NewServeMux(), paths: map[string]string{}}
}

// HandleAdmission serves AdmissionReviews on path with h; name labels the
// webhook's metrics and logs. Registering a path twice panics, as
// http.ServeMux does: it is a programming error.
func (s *Server) HandleAdmission(path, name string, h AdmissionHandler) {
	s.register(path, name)
	initAdmissionMetrics(name)
	s.mux.Handle(path, &admissionEndpoint{name: name, handler: h})
}

// HandleConversion serves ConversionReviews on path with c; name labels the
// webhook's metrics and logs.
func (s *Server) HandleConversion(path, name string, c Converter) {
	s.register(path, name)
	initConversionMetrics(name)
	s.mux.Handle(path, &conversionEndpoint{name: name, converter: c})
}

func (s *Server) register(path, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.paths[path]; ok {
		panic(fmt.Sprintf("webhook path %s registered twice (%s and %s)", path, prev, name))
	}
	s.paths[path] = name
}

// Paths returns the registered paths, sorted.
func (s *Server) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	paths := make([]string, 0, len(s.paths))
	for p := range s.paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// ServeHTTP dispatches to the webhook registered on the request's path.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if s.closingConnections.Load() {
		// The server closes the connection after this answer, and the
		// caller, told so, does not send another request on it.
		w.Header().Set("Connection", "close")
	}
	s.mux.ServeHTTP(w, req)
}

// CloseConnections makes every answer from now on close its connection, for
// a replica that is shutting down. The API server keeps its connections to
// the webhook Service alive, and a kept connection stays with its replica
// after the endpoints have dropped it; told to close it after an answer, the
// API server reconnects through the Service to a replica that stays. Closing
// an idle connection instead races with a request being sent on it, which
// fails (EOF, broken pipe) and is not retried.
func (s *Server) CloseConnections() {
	s.closingConnections.Store(true)
}
