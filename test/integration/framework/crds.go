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

package framework

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// InstallCRDs creates the CRDs listed in manifests/crd/kustomization.yaml
// (or leaves them if they exist) and waits until every one is established.
// Every version is served, converted by this process
// (controlplane.ServeConversion), as manifests/default has the manager
// convert: tests write the design notes' v1beta1, the controllers read the
// stored v1. It takes no *testing.T so that TestMain can call it.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	crds, err := controlplane.CRDs()
	if err != nil {
		return err
	}
	url, caBundle, err := controlplane.ServeConversion()
	if err != nil {
		return fmt.Errorf("serving the conversion webhooks: %w", err)
	}
	return controlplane.InstallCRDs(ctx, cfg, controlplane.WithConversion(crds, url, caBundle))
}

var (
	crdsOnce sync.Once
	crdsErr  error
)

// RequireCRDs installs the CRDs once per test binary, at the first test
// that needs them, and fails every test that needs them if that failed.
func RequireCRDs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	crdsOnce.Do(func() { crdsErr = InstallCRDs(context.Background(), cfg) })
	if crdsErr != nil {
		t.Fatalf("installing the CRDs: %v", crdsErr)
	}
}
