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
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// pipelineOptionsName is the ConfigMap of manifests/manager that holds the
// Pipeline allowlists for the manager's flags, written into the Pipeline
// admission policy by manifests/components/pipeline-options; kustomize's
// configMapGenerator adds a hash to it. The chart has no such ConfigMap.
const pipelineOptionsName = "controller-manager-pipeline-options"

// resolvePipelineOptions turns a kustomize build into what a cluster makes
// of it and the chart renders: the Deployment's $(VAR) arguments replaced
// by the values of the ConfigMap its env names (and those env entries
// dropped), and the ConfigMap, which nothing else reads, left out.
func resolvePipelineOptions(t *testing.T, objects []object) []object {
	t.Helper()
	var generated string
	data := map[string]any{}
	for _, o := range objects {
		if o.kind() == "ConfigMap" && strings.HasPrefix(o.name(), pipelineOptionsName+"-") {
			generated = o.name()
			data, _ = o["data"].(map[string]any)
		}
	}
	if generated == "" {
		t.Fatalf("the kustomize build has no ConfigMap %s-<hash>", pipelineOptionsName)
	}
	var resolved []object
	for _, o := range objects {
		switch o.kind() {
		case "ConfigMap":
			if o.name() == generated {
				continue
			}
		case "Deployment":
			c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			vars := map[string]string{}
			var env []any
			for _, e := range asList(c["env"]) {
				e := e.(map[string]any)
				ref, _ := nested(e, "valueFrom", "configMapKeyRef").(map[string]any)
				if ref == nil || ref["name"] != generated {
					env = append(env, e)
					continue
				}
				value, ok := data[ref["key"].(string)].(string)
				if !ok {
					t.Errorf("env %s names key %v, which ConfigMap %s lacks", e["name"], ref["key"], generated)
				}
				vars[e["name"].(string)] = value
			}
			if env == nil {
				delete(c, "env")
			} else {
				c["env"] = env
			}
			var args []any
			for _, a := range asList(c["args"]) {
				s := a.(string)
				for name, value := range vars {
					s = strings.ReplaceAll(s, "$("+name+")", value)
				}
				if strings.Contains(s, "$(") {
					t.Errorf("argument %q names a variable the Deployment does not define", s)
				}
				args = append(args, s)
			}
			c["args"] = args
		}
		resolved = append(resolved, o)
	}
	return resolved
}

func asList(v any) []any { l, _ := v.([]any); return l }

func nested(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// policyOptions is what the Pipeline admission policy's flag* variables
// say, read as the manager reads its flags: each variable a CEL string
// literal of a flag's value.
func policyOptions(t *testing.T, objects []object) pipeline.Options {
	t.Helper()
	policy := one(t, objects, "ValidatingAdmissionPolicy", "ndsl-pipeline-validation")
	variables := map[string]string{}
	for _, v := range asList(nested(policy, "spec", "variables")) {
		v := v.(map[string]any)
		variables[v["name"].(string)] = v["expression"].(string)
	}
	var args []string
	for flag, name := range framework.PipelinePolicyVariables {
		literal, ok := variables[name]
		if !ok || len(literal) < 2 || literal[0] != '\'' || literal[len(literal)-1] != '\'' || strings.ContainsAny(literal[1:len(literal)-1], `'\`) {
			t.Fatalf("the Pipeline policy's variable %s is %q; want a CEL string literal of --%s", name, literal, flag)
		}
		args = append(args, fmt.Sprintf("--%s=%s", flag, literal[1:len(literal)-1]))
	}
	sort.Strings(args)
	return parseArgs(t, args).Pipeline
}

// allowlists is the part of the Pipeline options the admission policy
// holds.
func allowlists(o pipeline.Options) pipeline.Options {
	return pipeline.Options{DefaultNamespace: o.DefaultNamespace, AllowedNamespaces: o.AllowedNamespaces,
		AllowedNFS: o.AllowedNFS, AllowedImages: o.AllowedImages, MaxReplicas: o.MaxReplicas}
}

// checkPipelineOptions fails unless the manager's flags in objects give
// the allowlists want, the Pipeline policy holds the same, and its binding
// takes the manager's namespace as its param.
func checkPipelineOptions(t *testing.T, what string, objects []object, namespace string, want pipeline.Options) {
	t.Helper()
	flags := allowlists(parseArgs(t, takeArgs(t, one(t, objects, "Deployment", "controller-manager"))).Pipeline)
	if !reflect.DeepEqual(flags, want) {
		t.Errorf("%s: the manager's flags give %+v; want %+v", what, flags, want)
	}
	if policy := allowlists(policyOptions(t, objects)); !reflect.DeepEqual(policy, flags) {
		t.Errorf("%s: the Pipeline policy holds %+v; the manager's flags %+v", what, policy, flags)
	}
	binding := one(t, objects, "ValidatingAdmissionPolicyBinding", "ndsl-pipeline-validation")
	ref, _ := binding["spec"].(map[string]any)["paramRef"].(map[string]any)
	if ref["name"] != namespace || ref["namespace"] != nil {
		t.Errorf("%s: the Pipeline policy's binding takes %v/%v as its param; want the Namespace %s", what, ref["namespace"], ref["name"], namespace)
	}
}

// The Pipeline admission policy's allowlists and the manager's Pipeline
// flags come from one place: the chart renders both from pipeline.*, and
// manifests/default gives the Deployment its flags from a ConfigMap that
// manifests/components/pipeline-options writes into the policy, whether the
// values are the defaults or a user's kustomization merges others in as
// that component says (the hash-suffixed name followed, the namespace
// moved).
func TestPipelineOptionsAreTheFlags(t *testing.T) {
	chartValues := map[string]any{"pipeline": map[string]any{
		"namespace": "models", "allowedNamespaces": []any{"team-a", "*"}, "maxReplicas": 7,
		"allowedNFS":    []any{"nfs.example.com:/models", "10.0.0.9"},
		"allowedImages": []any{"registry.example.com/", "docker.io/library/nginx"},
	}}
	want := pipeline.Options{DefaultNamespace: "models", AllowedNamespaces: []string{"team-a", "*"}, MaxReplicas: 7,
		AllowedNFS: []string{"nfs.example.com:/models", "10.0.0.9"}, AllowedImages: []string{"registry.example.com/", "docker.io/library/nginx"}}
	defaults := pipeline.DefaultOptions()
	defaults = pipeline.Options{DefaultNamespace: defaults.DefaultNamespace, MaxReplicas: defaults.MaxReplicas,
		AllowedNamespaces: []string{}, AllowedNFS: []string{}, AllowedImages: []string{}}

	checkPipelineOptions(t, "chart, defaults", render(t, "ndsl-system", nil), "ndsl-system", defaults)
	checkPipelineOptions(t, "chart, values", render(t, "platform", chartValues), "platform", want)

	root := repoRoot(t)
	base := kustomize(t, filepath.Join(root, "manifests", "default"))
	checkPipelineOptions(t, "manifests/default", resolvePipelineOptions(t, base), "ndsl-system", defaults)

	// The recipe of manifests/components/pipeline-options: the values in a
	// Component of the user's, then that component again, with kubectl and
	// with the oldest kustomize users have.
	dir := t.TempDir()
	rel := func(path ...string) string {
		r, err := filepath.Rel(dir, filepath.Join(append([]string{root, "manifests"}, path...)...))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: platform
resources: [%q]
components: [pipeline-values, %q]
`, rel("default"), rel("components", "pipeline-options"))
	values := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
configMapGenerator:
  - name: %s
    namespace: ndsl-system
    behavior: merge
    literals:
      - pipeline-namespace=models
      - pipeline-allowed-namespaces=team-a,*
      - pipeline-allowed-nfs=nfs.example.com:/models,10.0.0.9
      - pipeline-allowed-images=registry.example.com/,docker.io/library/nginx
      - pipeline-max-replicas=7
`, pipelineOptionsName)
	if err := os.MkdirAll(filepath.Join(dir, "pipeline-values"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pipeline-values", "kustomization.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range framework.Kustomizers(t) {
		merged := resolvePipelineOptions(t, decode(t, string(k.Build(t, dir))))
		checkPipelineOptions(t, k.Name+": a kustomization merging values", merged, "platform", want)
	}

	// A value that would end the CEL literal is refused by the chart.
	if _, err := renderText(t, "ndsl-system", map[string]any{"pipeline": map[string]any{"allowedImages": []any{"registry.example.com/a'b"}}}); err == nil ||
		!strings.Contains(err.Error(), "holds ' or") {
		t.Errorf("an image prefix with a quote: %v; want the render refused", err)
	}

	// A flag in extraArgs would make the manager and the policy disagree.
	if _, err := renderText(t, "ndsl-system", map[string]any{"extraArgs": []any{"--pipeline-allowed-nfs=10.0.0.1"}}); err == nil ||
		!strings.Contains(err.Error(), "set it in pipeline.* instead") {
		t.Errorf("extraArgs --pipeline-allowed-nfs: %v; want the render refused", err)
	}
}
