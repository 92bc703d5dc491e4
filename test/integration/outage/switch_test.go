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

package outage

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A kustomize user on Kubernetes 1.36 who installed with the App webhooks
// (manifests/default-webhooks, install-webhooks.yaml) and then applies
// manifests/default, as an upgrade to this version does: kubectl apply
// removes the App webhooks and adds the policies. Applying the webhooks'
// install again puts the webhooks back; the policies, which kubectl apply
// does not prune, stay beside them and admit alike.
func TestKustomizeSwitchesAdmission(t *testing.T) {
	ctx := context.Background()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	apply := func(dir string) {
		t.Helper()
		if out, err := kubectl(t, "", "apply", "-k", filepath.Join(root, "manifests", dir)); err != nil {
			t.Fatalf("kubectl apply -k manifests/%s: %v\n%s", dir, err, out)
		}
	}
	appHooks := func() []string {
		t.Helper()
		return framework.CalledWebhooks(ctx, t, cp.Client)
	}
	withHooks := []string{"mutate.apps.ingress.example.com", "validate.apps.ingress.example.com", "validate.pipelines.distri-infer.ndsl.cn"}

	apply("default-webhooks")
	if got := appHooks(); !slices.Equal(got, withHooks) {
		t.Errorf("after manifests/default-webhooks: webhooks %v, want %v", got, withHooks)
	}
	apply("default")
	// The Pipeline webhook stays called beside the policies, failing open.
	if got, want := appHooks(), []string{"validate.pipelines.distri-infer.ndsl.cn"}; !slices.Equal(got, want) {
		t.Errorf("after manifests/default over it: webhooks %v, want %v", got, want)
	}
	for _, name := range []string{"ndsl-app-validation", "ndsl-app-warnings", "ndsl-pipeline-validation", "ndsl-pipeline-warnings"} {
		if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("after manifests/default: binding %s: %v", name, err)
		}
	}
	if _, err := cp.Client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, "ndsl-app-defaulting", metav1.GetOptions{}); err != nil {
		t.Errorf("after manifests/default: binding ndsl-app-defaulting: %v", err)
	}
	apply("default-webhooks")
	if got := appHooks(); !slices.Equal(got, withHooks) {
		t.Errorf("after manifests/default-webhooks again: webhooks %v, want %v", got, withHooks)
	}
	// As the package's other tests expect it.
	apply("default")
}
