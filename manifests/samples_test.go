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

// Package manifests_test checks the shipped manifests as files, without a
// cluster.
package manifests_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestSamplesHaveDistinctNames: `kubectl apply -f manifests/samples/` must
// create every sample. Two samples of one resource under one name (the
// Pipeline's v1 and v1beta1 are one resource) would make the second
// silently replace the first ("configured") and roll its children.
func TestSamplesHaveDistinctNames(t *testing.T) {
	files, err := filepath.Glob("samples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples (%v)", err)
	}
	seen := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var obj metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		group, _, _ := strings.Cut(obj.APIVersion, "/")
		key := group + "/" + obj.Kind + " " + obj.Namespace + "/" + obj.Name
		if other, ok := seen[key]; ok {
			t.Errorf("%s and %s are both %s: applying the directory keeps only one", other, f, key)
		}
		seen[key] = f
	}
}
