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

// Package podmetrics is a stand-in for metrics-server in tests: an HTTPS
// server in the test process that serves the aggregated API
// metrics.k8s.io/v1beta1 (discovery, and PodMetrics of Running pods), with
// usage that the test decides, so that kube-controller-manager's HPA
// controller scales on resource metrics in a cluster without kubelets.
//
// kube-apiserver reaches it through an APIService whose Service is of type
// ExternalName "localhost": the aggregator proxies to <externalName>:<port>,
// while Endpoints refuse loopback addresses. The API server needs no extra
// flags for that: without --proxy-client-cert-file it proxies without a
// client certificate, and the stand-in authenticates nobody.
package podmetrics
