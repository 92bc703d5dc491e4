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

package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// The design notes' samples are the notes' own, byte for byte: the tests that
// apply them unchanged (test/integration/webhooks, test/integration/crd)
// prove nothing if someone "fixes" a copy. A deliberate change updates the
// digest here and says why.
func TestDesignNotesSamplesAreTheNotesOwn(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"app-v1beta1.yaml":      "1d1839a9314487dee999883d3e08d1ef286c2ba89571413c23514c565d6928db",
		"app-webhook-case.yaml": "5e8a61f7a15ac876832281365bcabf8925a3f96c747079c6e76911a24ee38b35",
		"pipeline-v1beta1.yaml": "378589bf64d32f33bba300d9061c313085decd65b9d013f1d0922f88fd6d5d6b",
	} {
		data, err := os.ReadFile(filepath.Join(root, "manifests", "samples", "design-notes", file))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("manifests/samples/design-notes/%s has sha256 %s, want the notes' %s", file, got, want)
		}
	}
}
