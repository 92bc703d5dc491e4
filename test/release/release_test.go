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

// Package release tests `make release` (docs/install.md): what it writes
// into DIST, and that the binary's version, the image tag and the chart's
// appVersion agree.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	version = "0.0.0-test.1"
	tag     = "v" + version
	// Not the published repository, so that docker load never shadows a real release.
	repository = "ndsl-release-test.local/controller-manager"
	image      = repository + ":" + tag
	platform   = "linux/amd64"
)

func TestRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	// One platform: a second would cross-compile every dependency again
	// (minutes, cold). hack/ociimage's own test covers several platforms.
	run(ctx, t, root, "make", "--no-print-directory", "release", "VERSION="+version, "RELEASE_IMAGE="+repository, "DIST="+dist, "RELEASE_PLATFORMS="+platform)

	archive := "controller-manager-" + tag + ".oci.tar"
	testArchive := "controller-manager-chart-test-" + tag + ".oci.tar"
	chart := "controller-manager-" + version + ".tgz"
	sbom := "controller-manager-" + tag + ".spdx.json"
	t.Run("SHA256SUMS covers every file", func(t *testing.T) {
		sums := readFile(t, filepath.Join(dist, "SHA256SUMS"))
		var listed []string
		for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
			sum, name, ok := strings.Cut(line, "  ")
			if !ok {
				t.Fatalf("SHA256SUMS line %q is not 'SUM  NAME'", line)
			}
			if got := sha256Hex(readFile(t, filepath.Join(dist, name))); got != sum {
				t.Errorf("%s: SHA256SUMS says %s, the file's is %s", name, sum, got)
			}
			listed = append(listed, name)
		}
		entries, err := os.ReadDir(dist)
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, e := range entries {
			if e.Name() != "SHA256SUMS" {
				files = append(files, e.Name())
			}
		}
		sort.Strings(listed)
		want := []string{archive, testArchive, chart, sbom, "install.yaml", "install-webhooks.yaml"}
		sort.Strings(want)
		if fmt.Sprint(files) != fmt.Sprint(want) || fmt.Sprint(listed) != fmt.Sprint(want) {
			t.Errorf("dist holds %v, SHA256SUMS lists %v; want %v", files, listed, want)
		}
	})

	t.Run("the chart's version, appVersion and image", func(t *testing.T) {
		files := untar(t, gunzip(t, readFile(t, filepath.Join(dist, chart))))
		var meta struct{ Version, AppVersion string }
		unmarshalYAML(t, files["controller-manager/Chart.yaml"], &meta)
		var values struct {
			Image struct{ Repository, Tag string }
			Tests struct {
				Image struct{ Repository, Tag string }
			}
		}
		unmarshalYAML(t, files["controller-manager/values.yaml"], &values)
		if meta.Version != version || meta.AppVersion != tag || values.Image.Repository != repository || values.Image.Tag != tag {
			t.Errorf("chart version %q, appVersion %q, image %s:%s; want %q, %q, %s", meta.Version, meta.AppVersion,
				values.Image.Repository, values.Image.Tag, version, tag, image)
		}
		// The helm test's image, released beside it (tag: the appVersion).
		if values.Tests.Image.Repository != repository+"-chart-test" || values.Tests.Image.Tag != "" {
			t.Errorf("chart tests.image %s:%q; want %s-chart-test and the appVersion", values.Tests.Image.Repository, values.Tests.Image.Tag, repository)
		}
		testIndex := untar(t, readFile(t, filepath.Join(dist, testArchive)))["index.json"]
		if !strings.Contains(string(testIndex), repository+"-chart-test:"+tag) {
			t.Errorf("%s names %s; want %s-chart-test:%s", testArchive, testIndex, repository, tag)
		}
	})

	t.Run("install.yaml runs the release's image", func(t *testing.T) {
		for _, file := range []string{"install.yaml", "install-webhooks.yaml"} {
			// image: keys only: the admission policies' CEL says "spec.image: ".
			lines := regexp.MustCompile(`(?m)^\s*(- )?image: (.*)$`).FindAllStringSubmatch(string(readFile(t, filepath.Join(dist, file))), -1)
			if len(lines) != 1 || lines[0][2] != image {
				t.Errorf("%s has image: lines %q; want one, naming %s", file, lines, image)
			}
		}
	})

	// install.yaml admits Apps by policy (Kubernetes 1.36 and later), its
	// App webhooks never called; install-webhooks.yaml by the manager's
	// webhooks, for older clusters.
	t.Run("install-webhooks.yaml calls the App webhooks and has no policies", func(t *testing.T) {
		for file, want := range map[string]bool{"install.yaml": true, "install-webhooks.yaml": false} {
			y := string(readFile(t, filepath.Join(dist, file)))
			if policies, inert := strings.Contains(y, "kind: MutatingAdmissionPolicy\n"), strings.Count(y, "name: admitted-by-policies"); policies != want || (inert == 2) != want {
				t.Errorf("%s: admission policies %v, App webhooks never called %d; want %v, %v", file, policies, inert, want, want)
			}
		}
	})

	// Rendered with another kustomize than the project's, the bindings have
	// named a ServiceAccount "controller-manager" in the namespace "system".
	t.Run("install.yaml binds the ServiceAccounts it creates", func(t *testing.T) {
		type object struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			Subjects []struct{ Kind, Name, Namespace string }
		}
		var objects []object
		for _, doc := range strings.Split(string(readFile(t, filepath.Join(dist, "install.yaml"))), "\n---\n") {
			var o object
			unmarshalYAML(t, []byte(doc), &o)
			objects = append(objects, o)
		}
		accounts := map[string]bool{}
		for _, o := range objects {
			if o.Kind == "ServiceAccount" {
				accounts[o.Metadata.Namespace+"/"+o.Metadata.Name] = true
			}
		}
		bindings := 0
		for _, o := range objects {
			for _, s := range o.Subjects {
				if s.Kind == "ServiceAccount" {
					bindings++
					if !accounts[s.Namespace+"/"+s.Name] {
						t.Errorf("%s %s binds ServiceAccount %s/%s, which install.yaml does not create (it creates %v)", o.Kind, o.Metadata.Name, s.Namespace, s.Name, accounts)
					}
				}
			}
		}
		if bindings == 0 {
			t.Errorf("install.yaml binds no ServiceAccount")
		}
	})

	var amd64Binary []byte
	t.Run("the archive holds the platform asked for", func(t *testing.T) {
		files := untar(t, readFile(t, filepath.Join(dist, archive)))
		for name, data := range files {
			if d, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && sha256Hex(data) != d {
				t.Errorf("blob %s has digest %s", name, sha256Hex(data))
			}
		}
		blob := func(digest string) []byte {
			data, ok := files["blobs/"+strings.Replace(digest, ":", "/", 1)]
			if !ok {
				t.Fatalf("the archive has no blob %s", digest)
			}
			return data
		}
		type desc struct {
			MediaType, Digest string
			Platform          struct{ OS, Architecture string }
			Annotations       map[string]string
		}
		var layout struct{ Manifests []desc }
		unmarshalJSON(t, files["index.json"], &layout)
		if len(layout.Manifests) != 1 || layout.Manifests[0].Annotations["io.containerd.image.name"] != image {
			t.Fatalf("index.json names %+v; want one image index named %s", layout.Manifests, image)
		}
		var index struct{ Manifests []desc }
		unmarshalJSON(t, blob(layout.Manifests[0].Digest), &index)
		var platforms []string
		for _, m := range index.Manifests {
			p := m.Platform.OS + "/" + m.Platform.Architecture
			platforms = append(platforms, p)
			var manifest struct {
				Config desc
				Layers []desc
			}
			unmarshalJSON(t, blob(m.Digest), &manifest)
			var config struct {
				OS, Architecture string
				Config           struct {
					User       string
					Entrypoint []string
				}
			}
			unmarshalJSON(t, blob(manifest.Config.Digest), &config)
			if config.OS+"/"+config.Architecture != p || config.Config.User != "65532:65532" || fmt.Sprint(config.Config.Entrypoint) != "[/controller-manager]" {
				t.Errorf("%s: config %+v; want that platform, user 65532:65532, entrypoint /controller-manager", p, config)
			}
			binary := untar(t, gunzip(t, blob(manifest.Layers[len(manifest.Layers)-1].Digest)))["controller-manager"]
			f, err := elf.NewFile(bytes.NewReader(binary))
			if err != nil {
				t.Fatalf("%s: /controller-manager: %v", p, err)
			}
			if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[config.Architecture]; f.Machine != want {
				t.Errorf("%s: /controller-manager is for %v", p, f.Machine)
			}
			if p == "linux/amd64" {
				amd64Binary = binary
			}
		}
		if fmt.Sprint(platforms) != "["+platform+"]" {
			t.Errorf("the image index has platforms %v; want %s", platforms, platform)
		}
	})

	t.Run("the binary's version is the tag", func(t *testing.T) {
		if amd64Binary == nil {
			t.Fatal("no linux/amd64 binary in the archive")
		}
		bin := filepath.Join(t.TempDir(), "controller-manager")
		if err := os.WriteFile(bin, amd64Binary, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := run(ctx, t, root, bin, "--version"); got != "controller-manager "+tag {
			t.Errorf("controller-manager --version printed %q; want %q", got, "controller-manager "+tag)
		}
	})

	t.Run("the SBOM lists the binaries' modules", func(t *testing.T) {
		var doc struct {
			SPDXVersion string
			Packages    []struct {
				Name, VersionInfo string
				ExternalRefs      []struct{ ReferenceLocator string }
			}
		}
		unmarshalJSON(t, readFile(t, filepath.Join(dist, sbom)), &doc)
		purls := map[string]bool{}
		for _, p := range doc.Packages {
			for _, r := range p.ExternalRefs {
				purls[strings.SplitN(r.ReferenceLocator, "@", 2)[0]] = true
			}
		}
		for _, want := range []string{"pkg:golang/github.com/ndsl/controller-manager", "pkg:golang/k8s.io/client-go", "pkg:golang/stdlib"} {
			if !purls[want] {
				t.Errorf("the SBOM (%s, %d packages) has no package %s", doc.SPDXVersion, len(doc.Packages), want)
			}
		}
		if !strings.Contains(string(readFile(t, filepath.Join(dist, sbom))), "pkg:golang/github.com/ndsl/controller-manager@"+tag) {
			t.Errorf("the SBOM does not give the main module the version %s", tag)
		}
	})
}

func TestReleaseRefusesAVersionThatIsNotSemver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, v := range []string{"1.2", "v1.2.3.4", "1.2.3+build", "01.2.3", "latest"} {
		cmd := exec.CommandContext(ctx, "hack/release.sh", "v"+strings.TrimPrefix(v, "v"), "r", t.TempDir(), "")
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), "is not semver") {
			t.Errorf("VERSION=%s: err %v, output %q; want one line saying it is not semver", v, err, out)
		}
	}
}

// run runs a command in dir and returns its trimmed standard output.
func run(ctx context.Context, t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(begin).Round(time.Second))
	return strings.TrimSpace(stdout.String())
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func gunzip(t *testing.T, data []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// untar returns the regular files of a tar archive by name.
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
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func unmarshalJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v in %.200s", err, data)
	}
}

func unmarshalYAML(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%v in %.200s", err, data)
	}
}
