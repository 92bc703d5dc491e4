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

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMultiPlatformArchive: each platform's manifest carries its own
// binary and config, the index lists them in the order given, and
// docker load's manifest.json names the first. test/release checks one
// platform of a real release (a second would cross-compile every
// dependency again in make test).
func TestMultiPlatformArchive(t *testing.T) {
	dir := t.TempDir()
	binaries := map[string]string{"linux/amd64": "amd64 binary", "linux/arm64": "arm64 binary", "linux/s390x": "s390x binary"}
	order := []string{"linux/amd64", "linux/arm64", "linux/s390x"}
	var args []string
	for _, p := range order {
		f := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		if err := os.WriteFile(f, []byte(binaries[p]), 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, p+"="+f)
	}
	out := filepath.Join(dir, "image.tar")
	if err := run(options{ref: "example.test:5000/team/cm:v1.2.3", out: out, name: "cm", created: time.Unix(1, 0), binaries: args}); err != nil {
		t.Fatal(err)
	}
	files := untar(t, read(t, out))

	var layout struct{ Manifests []descriptor }
	decode(t, files["index.json"], &layout)
	if len(layout.Manifests) != 1 || layout.Manifests[0].Annotations["io.containerd.image.name"] != "example.test:5000/team/cm:v1.2.3" ||
		layout.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" {
		t.Fatalf("index.json names %+v; want one index named example.test:5000/team/cm, tag v1.2.3", layout.Manifests)
	}
	blob := func(d string) []byte {
		b, ok := files[blobPath(d)]
		if !ok {
			t.Fatalf("no blob %s in the archive", d)
		}
		return b
	}
	var index struct{ Manifests []descriptor }
	decode(t, blob(layout.Manifests[0].Digest), &index)
	if len(index.Manifests) != len(order) {
		t.Fatalf("the index has %d manifests; want %d", len(index.Manifests), len(order))
	}
	var firstConfig string
	for i, m := range index.Manifests {
		p := m.Platform.OS + "/" + m.Platform.Architecture
		if p != order[i] {
			t.Errorf("manifest %d is for %s; want %s", i, p, order[i])
		}
		var manifest struct {
			Config descriptor
			Layers []descriptor
		}
		decode(t, blob(m.Digest), &manifest)
		var config struct {
			OS, Architecture string
			Config           struct{ Entrypoint []string }
		}
		decode(t, blob(manifest.Config.Digest), &config)
		if config.OS+"/"+config.Architecture != p || strings.Join(config.Config.Entrypoint, " ") != "/cm" {
			t.Errorf("%s: config %+v; want that platform and entrypoint /cm", p, config)
		}
		if got := string(untar(t, gunzip(t, blob(manifest.Layers[len(manifest.Layers)-1].Digest)))["cm"]); got != binaries[p] {
			t.Errorf("%s: /cm holds %q; want %q", p, got, binaries[p])
		}
		if i == 0 {
			firstConfig = blobPath(manifest.Config.Digest)
		}
	}
	var dockerLoad []struct {
		Config   string
		RepoTags []string
	}
	decode(t, files["manifest.json"], &dockerLoad)
	if len(dockerLoad) != 1 || dockerLoad[0].Config != firstConfig || strings.Join(dockerLoad[0].RepoTags, " ") != "example.test:5000/team/cm:v1.2.3" {
		t.Errorf("manifest.json is %+v; want the first platform's config %s under the ref", dockerLoad, firstConfig)
	}
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}

func gunzip(t *testing.T, data []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func untar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}
