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

// Package lifecycle installs the chart with helm against a real
// kube-apiserver, uninstalls it and installs it again under another release
// name into another namespace, with the manager running in this process for
// the webhooks and conversion, and kube-controller-manager's namespace
// controller for namespace deletion (the chart's hook Jobs: see framework.RunHookJobs). The API server reaches the in-process
// webhook server through the chart's Service by endpoint routing
// (--enable-aggregator-routing) and an EndpointSlice the test writes.
package lifecycle

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{
		ControllerManager: true,
		// Added to the package's --controllers=*: every controller but the
		// Job controller, whose part framework.RunHookJobs plays.
		ControllerManagerArgs: []string{"--controllers=-job"},
		APIServerArgs:         []string{"--enable-aggregator-routing=true"},
	}, func(c *controlplane.ControlPlane) { cp = c }))
}
