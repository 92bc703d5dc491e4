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
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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

// policy returns the ValidatingAdmissionPolicy name of manifests/policies.
func policy(t *testing.T, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	policies, err := controlplane.LoadAdmissionPolicies()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(policies.Validating, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("manifests/policies has no ValidatingAdmissionPolicy %s", name)
	}
	return policies.Validating[i]
}

// TestPipelinePolicyImageGrammar: the Pipeline policy reads images with the
// App policy's grammar, which TestPolicyImageGrammar holds to the
// webhook's library.
func TestPipelinePolicyImageGrammar(t *testing.T) {
	app, _ := policyVariables(t, "ndsl-app-validation")
	pipeline, _ := policyVariables(t, "ndsl-pipeline-validation")
	for _, name := range []string{"referencePattern", "domainPattern"} {
		if pipeline[name] != app[name] {
			t.Errorf("variable %s differs between app-validation.yaml and pipeline-validation.yaml:\n%s\n%s", name, app[name], pipeline[name])
		}
	}
}

// TestPipelinePolicyNamesEveryDenial: a policy's message cannot ask the
// authorizer, so ndsl-pipeline-validation has one validation per set of
// rights the requester may lack (the letters dspDSP, in the webhook's
// order), and exactly one of them fails. Every non-empty subset must have
// its validation, whose message lists exactly its letters.
func TestPipelinePolicyNamesEveryDenial(t *testing.T) {
	const letters = "dspDSP"
	denied := regexp.MustCompile(`^variables\.delete \|\| variables\.denied != '([dspDSP]+)'$`)
	listed := regexp.MustCompile(`\+ \[([^\]]*)\]\.map\(k, variables\.accessErrors\[k\]\) \+`)
	count := regexp.MustCompile(`variables\.others \+ (\d+) > 1`)
	seen := map[string]bool{}
	for _, v := range policy(t, "ndsl-pipeline-validation").Spec.Validations {
		m := denied.FindStringSubmatch(v.Expression)
		if m == nil {
			continue
		}
		set := m[1]
		if seen[set] {
			t.Errorf("two validations for %q", set)
		}
		seen[set] = true
		var want []string
		for _, c := range set {
			want = append(want, "'"+string(c)+"'")
		}
		if l := listed.FindStringSubmatch(v.MessageExpression); l == nil || l[1] != strings.Join(want, ", ") {
			t.Errorf("validation for %q: its message lists %v, want %s", set, l, strings.Join(want, ", "))
		}
		for _, n := range count.FindAllStringSubmatch(v.MessageExpression, -1) {
			if n[1] != fmt.Sprint(len(set)) {
				t.Errorf("validation for %q: its message counts %s rights, want %d", set, n[1], len(set))
			}
		}
		if v.Message == "" {
			t.Errorf("validation for %q: no static message for a message past 5 KiB", set)
		}
	}
	for mask := 1; mask < 1<<len(letters); mask++ {
		var set string
		for i := range letters {
			if mask&(1<<i) != 0 {
				set += letters[i : i+1]
			}
		}
		if !seen[set] {
			t.Errorf("no validation for the rights %q", set)
		}
	}
}

// TestPipelineWarningsCoverEveryKey: the warnings policy has one validation
// per csiParameter key it may warn about, as many as the schema allows
// (maxProperties).
func TestPipelineWarningsCoverEveryKey(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join("crd", "distri-infer.ndsl.cn_pipelines.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)csiParameter:.*?maxProperties: (\d+)`).FindSubmatch(crd)
	if m == nil {
		t.Fatal("the Pipeline CRD gives csiParameter no maxProperties")
	}
	keys := 0
	for _, v := range policy(t, "ndsl-pipeline-warnings").Spec.Validations {
		if strings.HasPrefix(v.Expression, "size(variables.ignoredKeys) <= ") {
			keys++
		}
	}
	if fmt.Sprint(keys) != string(m[1]) {
		t.Errorf("%d validations warn about csiParameter keys; the schema allows %s keys", keys, m[1])
	}
}
