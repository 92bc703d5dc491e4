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

// Package userroles checks the roles shipped for people (manifests/rbac/
// user-roles.yaml) against a real kube-apiserver with kube-controller-manager,
// whose clusterrole-aggregation controller fills the built-in view, edit and
// admin roles from them: people are bound to the built-in roles, as they are
// for Deployments, and work with Apps; Pipelines need a deliberate grant.
package userroles

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true}, func(c *controlplane.ControlPlane) { cp = c }))
}
