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

// Package webhooks tests the App and Pipeline admission and conversion
// webhooks through a real kube-apiserver: the CRDs' conversion and the
// webhook configurations point at a webhook server in this process on
// 127.0.0.1 (clientConfig.url), and requests go through kubectl or clients
// that behave like it (strict field validation, warnings collected).
package webhooks

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	// kube-controller-manager, the scheduler and kwok let the seed samples
	// converge: pods scheduled on fake nodes and reported Ready.
	opts := controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true}
	os.Exit(controlplane.RunMain(m, opts, func(c *controlplane.ControlPlane) { cp = c }))
}
