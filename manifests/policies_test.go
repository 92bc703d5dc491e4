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

package manifests_test

import (
	"slices"
	"testing"

	"github.com/distribution/reference"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// policyVariables returns the variables of the ValidatingAdmissionPolicy
// name of manifests/policies, by name and in order.
func policyVariables(t *testing.T, name string) (map[string]string, []string) {
	t.Helper()
	policies, err := controlplane.LoadAdmissionPolicies()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(policies.Validating, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("manifests/policies has no ValidatingAdmissionPolicy %s", name)
	}
	vars := map[string]string{}
	var names []string
	for _, v := range policies.Validating[i].Spec.Variables {
		vars[v.Name] = v.Expression
		names = append(names, v.Name)
	}
	return vars, names
}

// TestPolicyImageGrammar: the App policies read an image with the grammar
// of the library the webhook parses it with, github.com/distribution/reference.
// A new version of it that changes the grammar fails here, not in a cluster.
func TestPolicyImageGrammar(t *testing.T) {
	vars, _ := policyVariables(t, "ndsl-app-validation")
	for name, want := range map[string]string{
		"referencePattern": reference.ReferenceRegexp.String(),
		"domainPattern":    "^" + reference.DomainRegexp.String() + "$",
	} {
		if got := vars[name]; got != "r'"+want+"'" {
			t.Errorf("variable %s is %s; want r'%s'", name, got, want)
		}
	}
}

// TestPolicyWarningsReadImagesAlike: the warnings policy has copies of the
// validation policy's image variables (a policy cannot share variables with
// another); they must not drift apart.
func TestPolicyWarningsReadImagesAlike(t *testing.T) {
	validation, names := policyVariables(t, "ndsl-app-validation")
	warnings, _ := policyVariables(t, "ndsl-app-warnings")
	start, end := slices.Index(names, "image"), slices.Index(names, "imageError")
	if start < 0 || end < start {
		t.Fatalf("app-validation.yaml has no variables image ... imageError: %v", names)
	}
	for _, name := range names[start : end+1] {
		if warnings[name] != validation[name] {
			t.Errorf("variable %s differs between app-validation.yaml and app-warnings.yaml:\n%s\n%s", name, validation[name], warnings[name])
		}
	}
}
