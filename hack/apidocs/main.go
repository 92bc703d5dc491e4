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

// Command apidocs writes docs/api-reference.md from the CRDs in
// manifests/crd. controller-gen writes those from the Go types in apis/,
// doc comments included, so the reference says exactly what the API server
// validates: types, defaults, enums, bounds and CEL rules, per version.
//
//	go run ./hack/apidocs [--crds manifests/crd] [--out docs/api-reference.md]
//
// hack/update-codegen.sh runs it after controller-gen; hack/verify-codegen.sh
// fails when the committed file differs.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	crdDir := flag.String("crds", "manifests/crd", "directory of the CRD manifests")
	out := flag.String("out", "docs/api-reference.md", "file to write")
	flag.Parse()

	crds, err := readCRDs(*crdDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, render(crds), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

// readCRDs reads every CRD manifest in dir, ordered by kind.
func readCRDs(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		if meta.Kind != "CustomResourceDefinition" {
			continue // kustomization.yaml
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRD in %s", dir)
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].Spec.Names.Kind < crds[j].Spec.Names.Kind })
	return crds, nil
}
