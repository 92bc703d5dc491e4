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
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// KustomizeVersions are the kustomize CLIs of hack/build-kustomize.sh: the
// oldest that users have. kubectl's embedded kustomize (v5.8.1 in kubectl
// 1.36, the newest minor) is tested beside it.
var KustomizeVersions = []string{"v5.0.1"}

// Kustomizer builds a kustomization directory: a kustomize CLI, or kubectl.
type Kustomizer struct {
	Name string
	Args []string
}

// Build runs k on dir and returns what it prints, failing t with
// kustomize's own error.
func (k Kustomizer) Build(t *testing.T, dir string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(k.Args[0], append(k.Args[1:], dir)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s of %s: %v: %s", k.Name, dir, err, stderr.String())
	}
	return out
}

// Kustomizers returns kubectl's kustomize and those of
// hack/build-kustomize.sh, beside the control plane's binaries
// ($CONTROLPLANE_BIN_DIR, else hack/bin).
func Kustomizers(t *testing.T) []Kustomizer {
	t.Helper()
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	all := []Kustomizer{{"kubectl", []string{kubectl, "kustomize"}}}
	dir := os.Getenv(controlplane.BinDirEnv)
	if dir == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "hack", "bin")
	}
	for _, v := range KustomizeVersions {
		path := filepath.Join(dir, "kustomize-"+v, "kustomize")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("kustomize %s is not built (%v): run hack/build-kustomize.sh (make kustomize)", v, err)
		}
		all = append(all, Kustomizer{"kustomize " + v, []string{path, "build"}})
	}
	return all
}
