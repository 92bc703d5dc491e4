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

package writes

import (
	"context"
	"testing"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	appclient "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/typed/app/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// startAppManager installs the CRDs, makes a namespace and starts a manager
// running the App controller alone (mutate adjusts its options), counting
// its writes; it returns once the manager is ready.
func startAppManager(t *testing.T, mutate func(*options.Options)) (ns string, apps appclient.AppInterface, m *framework.Manager) {
	t.Helper()
	if err := framework.InstallCRDs(context.Background(), cp.Config); err != nil {
		t.Fatal(err)
	}
	ns = framework.CreateNamespace(t, cp.Client)
	typed, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	m = framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName}
		if mutate != nil {
			mutate(o)
		}
	})
	framework.Eventually(t, timeout, "the manager to be ready", func(context.Context) (bool, error) {
		status, _, err := m.Get("/readyz/informer-sync")
		return status == 200, err
	})
	return ns, typed.AppV1beta1().Apps(ns), m
}
