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

// Package storageversion tests the storage version migrations the manager
// runs under its Lease (pkg/storageversion, the App and Pipeline
// controllers' MigrateStorage) against a real API server and etcd: Apps and
// Pipelines written while an earlier release stored v1beta1 end up stored
// at v1, and each CRD's status.storedVersions at [v1]. Without
// kube-controller-manager: the status stays as the controller first
// writes it.
package storageversion

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}
