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

// Package framework is the harness of the end-to-end suite in test/e2e: it
// brings up a cluster (the local control plane of pkg/testing/controlplane
// with kube-controller-manager, kube-scheduler and kwok, or an existing one),
// installs manifests/default, and runs the manager binary as separate OS
// processes that authenticate as the manifests' ServiceAccount.
//
// The suite is configured by environment variables (see ConfigFromEnv).
package framework
