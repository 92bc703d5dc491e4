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

package chart

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// managerBindings are the bindings whose subjects name the ServiceAccount
// sa in the release's namespace.
func managerBindings(t *testing.T, objects []object, sa string) []string {
	t.Helper()
	var out []string
	for _, o := range objects {
		for _, s := range subjects(t, o) {
			if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == "ndsl-system" {
				out = append(out, o.key())
			}
		}
	}
	slices.Sort(out)
	return out
}

// withValues is base with more top-level values.
func withValues(base map[string]any, more map[string]any) map[string]any {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}

// Issue 37: serviceAccount.create, .name and .annotations; the Deployment
// and every binding of the manager's name the chosen ServiceAccount.
func TestChartServiceAccount(t *testing.T) {
	for _, certificates := range []string{"self", "cert-manager"} {
		t.Run(certificates, func(t *testing.T) {
			defaults := managerBindings(t, render(t, "ndsl-system", everything(certificates)), "controller-manager")
			if len(defaults) < 5 {
				t.Fatalf("only %d bindings of the manager's ServiceAccount by default: %v", len(defaults), defaults)
			}
			for _, create := range []bool{true, false} {
				objects := render(t, "ndsl-system", withValues(everything(certificates), map[string]any{"serviceAccount": map[string]any{
					"create": create, "name": "platform-cm", "annotations": map[string]any{"iam.gke.io/gcp-service-account": "cm@p.iam.gserviceaccount.com"}}}))
				if got := deploymentOf(t, objects).Spec.Template.Spec.ServiceAccountName; got != "platform-cm" {
					t.Errorf("create=%v: serviceAccountName %q, want platform-cm", create, got)
				}
				if old := managerBindings(t, objects, "controller-manager"); len(old) != 0 {
					t.Errorf("create=%v: bindings still name controller-manager: %v", create, old)
				}
				bound := managerBindings(t, objects, "platform-cm")
				// The same bindings, under the same names.
				if !slices.Equal(bound, defaults) {
					t.Errorf("create=%v: bindings of platform-cm %v, want %v", create, bound, defaults)
				}
				var sas []string
				for _, o := range ofKind(objects, "ServiceAccount") {
					sas = append(sas, o.name())
				}
				if create {
					sa := one(t, objects, "ServiceAccount", "platform-cm")
					if sa.annotations()["iam.gke.io/gcp-service-account"] != "cm@p.iam.gserviceaccount.com" {
						t.Errorf("ServiceAccount annotations %v", sa.annotations())
					}
				} else if slices.Contains(sas, "platform-cm") || slices.Contains(sas, "controller-manager") {
					t.Errorf("create=false: the chart renders the manager's ServiceAccount: %v", sas)
				}
			}
		})
	}
}

// podOf is the Deployment's pod template spec.
func podOf(t *testing.T, values map[string]any) corev1.PodSpec {
	t.Helper()
	return deploymentOf(t, render(t, "ndsl-system", values)).Spec.Template.Spec
}
