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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// helmVersion names the directory hack/build-helm.sh builds helm into.
const helmVersion = "v4.2.4"

// release is the release name every test uses; the object names do not
// depend on it.
const release = "ndsl"

// helmPath is the helm of hack/build-helm.sh, beside the control plane's
// binaries ($CONTROLPLANE_BIN_DIR, else hack/bin).
func helmPath(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(controlplane.BinDirEnv)
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "hack", "bin")
	}
	path := filepath.Join(dir, "helm-"+helmVersion, "helm")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("helm is not built (%v): run hack/build-helm.sh (make helm)", err)
	}
	return path
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t *testing.T) string {
	return filepath.Join(repoRoot(t), "charts", "controller-manager")
}

// helm runs helm with a private configuration and cache, so that nothing
// of the user's (repositories, plugins, kubeconfig) leaks in.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmPath(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache",
		"HELM_DATA_HOME="+home+"/data", "KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// installing prepares a test that helm installs the chart into namespace:
// it runs the chart's CRD hook Jobs (framework.RunHookJobs; without them
// helm waits for the pre-install Job until it times out) until the test's
// end, and uninstalls the release then, so that a failed test leaves no
// release for the next one to trip on ("cannot reuse a name").
func installing(t *testing.T, namespace string) {
	t.Helper()
	t.Cleanup(framework.RunHookJobs(t, cp)) // last: the uninstall below runs the pre-delete Job
	t.Cleanup(func() {
		if out, err := helm(t, "uninstall", release, "--ignore-not-found", "--kubeconfig", cp.KubeconfigPath, "--namespace", namespace); err != nil {
			t.Errorf("helm uninstall at the test's end: %v\n%s", err, out)
		}
	})
}

// valuesFile writes values as a values file for helm -f.
func valuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// render is helm template of the chart into namespace with values; it
// fails the test if the chart does not render.
func render(t *testing.T, namespace string, values map[string]any) []object {
	t.Helper()
	out, err := renderText(t, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return asApplied(t, decode(t, out))
}

// asApplied is what the chart leaves in the cluster: the CRDs its hook
// ConfigMap carries, as `controller-manager crds apply` applies them, in
// place of the CRD hooks (ConfigMap, Jobs and their RBAC).
func asApplied(t *testing.T, objects []object) []object {
	t.Helper()
	var out []object
	for _, o := range objects {
		if o.name() != "controller-manager-crds" && o.name() != "ndsl-controller-manager:crds" && o.labels()["app.kubernetes.io/component"] != "crds" {
			out = append(out, o)
			continue
		}
		if o.kind() != "ConfigMap" {
			continue
		}
		data, _ := o["data"].(map[string]any)
		for _, text := range data {
			for _, crd := range decode(t, text.(string)) {
				annotations := crd.annotations()
				if annotations == nil {
					annotations = map[string]any{}
				}
				annotations["helm.sh/resource-policy"] = "keep"
				crd.meta()["annotations"] = annotations
				out = append(out, crd)
			}
		}
	}
	return out
}

func renderText(t *testing.T, namespace string, values map[string]any) (string, error) {
	t.Helper()
	return helm(t, "template", release, chartDir(t), "--namespace", namespace, "-f", valuesFile(t, values))
}

// kustomize builds a kustomization under manifests/ with kubectl kustomize.
func kustomize(t *testing.T, dir string) []object {
	t.Helper()
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return decode(t, string(out))
}

// kustomizeWith builds manifests/default with the component
// manifests/components/<name>.
func kustomizeWith(t *testing.T, name string) []object {
	t.Helper()
	root := repoRoot(t)
	component := filepath.Join(root, "manifests", "components", name)
	// A kustomization of the user's, as manifests/ documents it: kustomize
	// takes relative paths only, and the namespace transformers come last.
	dir := t.TempDir()
	rel := func(path string) string {
		r, err := filepath.Rel(dir, path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q]\ncomponents: [%q]\n",
		rel(filepath.Join(root, "manifests", "default")), rel(component))
	if namespace := filepath.Join(root, "manifests", "namespace"); exists(namespace) {
		k += fmt.Sprintf("transformers: [%q]\n", rel(namespace))
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, dir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// kustomizeComponent is kustomizeWith for a part that only the kustomize
// components have: the test is skipped without manifests/components/<name>.
func kustomizeComponent(t *testing.T, name string) []object {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot(t), "manifests", "components", name)); err != nil {
		t.Skipf("no kustomize component %s: %v", name, err)
	}
	return kustomizeWith(t, name)
}

// object is one rendered document.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) meta() map[string]any {
	m, _ := o["metadata"].(map[string]any)
	return m
}
func (o object) name() string      { s, _ := o.meta()["name"].(string); return s }
func (o object) namespace() string { s, _ := o.meta()["namespace"].(string); return s }
func (o object) key() string       { return o.kind() + " " + o.namespace() + "/" + o.name() }

func (o object) labels() map[string]any {
	m, _ := o.meta()["labels"].(map[string]any)
	return m
}

func (o object) annotations() map[string]any {
	m, _ := o.meta()["annotations"].(map[string]any)
	return m
}

// into converts the object into a typed API object.
func (o object) into(t *testing.T, typed any) {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, typed); err != nil {
		t.Fatalf("%s: %v", o.key(), err)
	}
}

func decode(t *testing.T, text string) []object {
	t.Helper()
	var out []object
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("decoding rendered YAML: %v", err)
			}
			break
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

// byKey indexes objects by kind, namespace and name.
func byKey(objects []object) map[string]object {
	m := map[string]object{}
	for _, o := range objects {
		m[o.key()] = o
	}
	return m
}

// ofKind returns the objects of kind.
func ofKind(objects []object, kind string) []object {
	var out []object
	for _, o := range objects {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only object of kind and name, failing the test otherwise.
func one(t *testing.T, objects []object, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range objects {
		if o.kind() == kind && o.name() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects %s %s rendered, want 1", len(found), kind, name)
	}
	return found[0]
}
