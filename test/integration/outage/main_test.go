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

// Package outage installs manifests/default into a real kube-apiserver
// where the manager never runs (no node takes its pods): what users can
// still do while every manager pod is down.
package outage

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	// kube-controller-manager aggregates the user roles into edit.
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true}, func(c *controlplane.ControlPlane) { cp = c }))
}
