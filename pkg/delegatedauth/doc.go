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

// Package delegatedauth protects an HTTP handler the way kube-controller-manager
// protects /metrics: the bearer token must pass a TokenReview and its user
// must be allowed the request's verb on its path by a SubjectAccessReview,
// both sent to the API server and both answers cached briefly.
//
// It calls the review APIs through client-go directly rather than through
// k8s.io/apiserver's authenticatorfactory, authorizerfactory and
// endpoints/filters: those bring gRPC, OpenTelemetry's exporters and CEL into
// the binary (232 of its 1,093 packages), which cost the manager 17 MiB of
// resident memory at idle, 30% of it, for two API calls and two caches.
package delegatedauth
