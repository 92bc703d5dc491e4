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

// Package chart checks the Helm chart (charts/controller-manager): helm lint
// with several value sets; what it renders against manifests/ (the same
// objects, rules and flags), in any namespace, with no caBundle; and
// helm install and upgrade against a real kube-apiserver, where an upgrade
// must leave the caBundles the manager injected alone. No Job controller
// runs here: a test that installs calls installing, whose
// framework.RunHookJobs plays it for the CRD hook Jobs. helm is built by
// hack/build-helm.sh (make helm).
package chart

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}
