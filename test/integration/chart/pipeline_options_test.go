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
)

// pipelineOptionsName is the ConfigMap that holds the Pipeline allowlists
// for both the manager's flags and the Pipeline admission policy;
// kustomize's configMapGenerator adds a hash to it.
const pipelineOptionsName = "controller-manager-pipeline-options"

// resolvePipelineOptions turns a kustomize build into what a cluster makes
// of it and the chart renders: the Deployment's $(VAR) arguments replaced
// by the values of the ConfigMap its env names (and those env entries
// dropped), and the generated ConfigMap's hash taken off its name and off
// the policy binding's paramRef.
func resolvePipelineOptions(t *testing.T, objects []object) []object {
	t.Helper()
	var generated string
	data := map[string]any{}
	for _, o := range objects {
		if o.kind() == "ConfigMap" && strings.HasPrefix(o.name(), pipelineOptionsName+"-") {
			generated = o.name()
			data, _ = o["data"].(map[string]any)
			o.meta()["name"] = pipelineOptionsName
		}
	}
	if generated == "" {
		t.Fatalf("the kustomize build has no ConfigMap %s-<hash>", pipelineOptionsName)
	}
	for _, o := range objects {
		switch o.kind() {
		case "ValidatingAdmissionPolicyBinding":
			if ref, ok := o["spec"].(map[string]any)["paramRef"].(map[string]any); ok && ref["name"] == generated {
				ref["name"] = pipelineOptionsName
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
	}
	return objects
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

// pipelineOptionsOf is what a ConfigMap's data says, read as the manager
// reads its flags: each key a flag's name.
func pipelineOptionsOf(t *testing.T, o object) pipeline.Options {
	t.Helper()
	var args []string
	for k, v := range o["data"].(map[string]any) {
		args = append(args, fmt.Sprintf("--%s=%s", k, v))
	}
	sort.Strings(args)
	return parseArgs(t, args).Pipeline
}

// allowlists is the part of the Pipeline options the admission policy
// reads from the ConfigMap.
func allowlists(o pipeline.Options) pipeline.Options {
	return pipeline.Options{DefaultNamespace: o.DefaultNamespace, AllowedNamespaces: o.AllowedNamespaces,
		AllowedNFS: o.AllowedNFS, AllowedImages: o.AllowedImages, MaxReplicas: o.MaxReplicas}
}

// checkPipelineOptions fails unless the manager's flags in objects give
// the allowlists want, the ConfigMap the policy's binding names (in the
// manager's namespace) says the same, and the binding names it.
func checkPipelineOptions(t *testing.T, what string, objects []object, namespace, configMap string, want pipeline.Options) {
	t.Helper()
	flags := allowlists(parseArgs(t, takeArgs(t, one(t, objects, "Deployment", "controller-manager"))).Pipeline)
	if !reflect.DeepEqual(flags, want) {
		t.Errorf("%s: the manager's flags give %+v; want %+v", what, flags, want)
	}
	cm := one(t, objects, "ConfigMap", configMap)
	if cm.namespace() != namespace {
		t.Errorf("%s: ConfigMap %s is in %q, want the manager's namespace %q", what, configMap, cm.namespace(), namespace)
	}
	if params := allowlists(pipelineOptionsOf(t, cm)); !reflect.DeepEqual(params, flags) {
		t.Errorf("%s: the policy's ConfigMap says %+v; the manager's flags %+v", what, params, flags)
	}
	binding := one(t, objects, "ValidatingAdmissionPolicyBinding", "ndsl-pipeline-validation")
	ref, _ := binding["spec"].(map[string]any)["paramRef"].(map[string]any)
	if ref["name"] != configMap || ref["namespace"] != namespace {
		t.Errorf("%s: the Pipeline policy's binding reads %v/%v; want %s/%s", what, ref["namespace"], ref["name"], namespace, configMap)
	}
}

// The Pipeline admission policy's parameters and the manager's Pipeline
// flags come from one place: the chart renders both from pipeline.*, and
// manifests/default gives the Deployment its flags from the ConfigMap the
// binding names, whether the values are the defaults or a user's
// kustomization merges others in (the hash-suffixed name followed, the
// namespace moved).
func TestPipelineOptionsAreTheFlags(t *testing.T) {
	values := map[string]any{"pipeline": map[string]any{
		"namespace": "models", "allowedNamespaces": []any{"team-a", "*"}, "maxReplicas": 7,
		"allowedNFS":    []any{"nfs.example.com:/models", "10.0.0.9"},
		"allowedImages": []any{"registry.example.com/", "docker.io/library/nginx"},
	}}
	want := pipeline.Options{DefaultNamespace: "models", AllowedNamespaces: []string{"team-a", "*"}, MaxReplicas: 7,
		AllowedNFS: []string{"nfs.example.com:/models", "10.0.0.9"}, AllowedImages: []string{"registry.example.com/", "docker.io/library/nginx"}}
	defaults := pipeline.DefaultOptions()
	defaults = pipeline.Options{DefaultNamespace: defaults.DefaultNamespace, MaxReplicas: defaults.MaxReplicas,
		AllowedNamespaces: []string{}, AllowedNFS: []string{}, AllowedImages: []string{}}

	checkPipelineOptions(t, "chart, defaults", render(t, "ndsl-system", nil), "ndsl-system", pipelineOptionsName, defaults)
	checkPipelineOptions(t, "chart, values", render(t, "platform", values), "platform", pipelineOptionsName, want)

	root := repoRoot(t)
	base := kustomize(t, filepath.Join(root, "manifests", "default"))
	checkPipelineOptions(t, "manifests/default", resolvePipelineOptions(t, base), "ndsl-system", pipelineOptionsName, defaults)

	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(root, "manifests", "default"))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: platform
resources: [%q]
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
`, rel, pipelineOptionsName)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	merged := resolvePipelineOptions(t, kustomize(t, dir))
	checkPipelineOptions(t, "a kustomization merging values", merged, "platform", pipelineOptionsName, want)

	// The same values give the same ConfigMap, whichever renders it.
	chartData := one(t, render(t, "platform", values), "ConfigMap", pipelineOptionsName)["data"]
	if kustomizeData := one(t, merged, "ConfigMap", pipelineOptionsName)["data"]; !reflect.DeepEqual(chartData, kustomizeData) {
		t.Errorf("the chart's ConfigMap holds %v; kustomize's %v", chartData, kustomizeData)
	}

	// A flag in extraArgs would make the manager and the policy disagree.
	if _, err := renderText(t, "ndsl-system", map[string]any{"extraArgs": []any{"--pipeline-allowed-nfs=10.0.0.1"}}); err == nil ||
		!strings.Contains(err.Error(), "set it in pipeline.* instead") {
		t.Errorf("extraArgs --pipeline-allowed-nfs: %v; want the render refused", err)
	}
}
