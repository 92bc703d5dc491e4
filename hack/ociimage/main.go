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

// Command ociimage writes the manager's multi-arch image as an OCI image
// layout in a tar archive, from static binaries built on this machine, with
// no base image to pull (make release):
//
//	go run ./hack/ociimage --ref ghcr.io/ndsl/controller-manager:v0.1.0 --out image.tar \
//	    linux/amd64=_output/linux-amd64/controller-manager linux/arm64=...
//
// Each platform's image is what the Dockerfile builds on the distroless
// static nonroot base: a base layer (passwd and group with nonroot 65532,
// /tmp, /home/nonroot, CA certificates when --ca-certs names them), shared
// by every platform, and a layer with /controller-manager. The archive's
// index.json names one image index of the platforms' manifests, so
// `skopeo copy --all oci-archive:image.tar docker://REF` pushes them all;
// its manifest.json names the first platform's image, so `docker load`
// (which reads no OCI index before Docker 25) loads that one under REF.
// Every timestamp is --created: the same inputs give the same bytes.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	nonroot       = 65532
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// blobs holds the archive's content-addressed files, each once.
type blobs map[string][]byte

func (b blobs) add(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	d := descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
	b[d.Digest] = data
	return d
}

func (b blobs) addJSON(mediaType string, v any) descriptor {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types, which always marshal
	}
	return b.add(mediaType, data)
}

// file is one entry of a layer.
type file struct {
	name string
	mode int64
	uid  int
	data []byte
	dir  bool
}

// layer returns the gzipped tar of files and the digest of the tar itself
// (the config's diff_id).
func layer(files []file, created time.Time) (gz []byte, diffID string, err error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: created, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(tarBuf.Bytes())
	var gzBuf bytes.Buffer
	zw := gzip.NewWriter(&gzBuf) // a zero header: no name, no mtime
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gzBuf.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// baseFiles stands in for gcr.io/distroless/static:nonroot.
func baseFiles(caCerts []byte) []file {
	files := []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
	}
	if caCerts != nil {
		files = append(files,
			file{name: "etc/ssl", mode: 0o755, dir: true},
			file{name: "etc/ssl/certs", mode: 0o755, dir: true},
			file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caCerts})
	}
	return append(files,
		file{name: "home", mode: 0o755, dir: true},
		file{name: "home/nonroot", mode: 0o700, uid: nonroot, dir: true},
		file{name: "tmp", mode: 0o1777, dir: true})
}

type options struct {
	ref, out, caCerts, source, revision string
	// name is the binary's path under / and the entrypoint.
	name     string
	created  time.Time
	binaries []string // os/arch=path
}

func run(o options) error {
	repository, tag, ok := splitRef(o.ref)
	if !ok {
		return fmt.Errorf("--ref %q is not REPOSITORY:TAG", o.ref)
	}
	if len(o.binaries) == 0 {
		return fmt.Errorf("no binary given: name them as os/arch=path")
	}
	var caCerts []byte
	if o.caCerts != "" {
		var err error
		if caCerts, err = os.ReadFile(o.caCerts); err != nil {
			return fmt.Errorf("reading the CA certificates: %w", err)
		}
	}
	b := blobs{}
	baseGz, baseDiffID, err := layer(baseFiles(caCerts), o.created)
	if err != nil {
		return fmt.Errorf("writing the base layer: %w", err)
	}
	base := b.add(mediaLayer, baseGz)

	var manifests []descriptor
	var dockerLoad []map[string]any
	for _, arg := range o.binaries {
		plat, binFile, _ := strings.Cut(arg, "=")
		osName, arch, ok := strings.Cut(plat, "/")
		if !ok || binFile == "" || osName == "" || arch == "" {
			return fmt.Errorf("binary %q is not os/arch=path", arg)
		}
		bin, err := os.ReadFile(binFile)
		if err != nil {
			return fmt.Errorf("reading the %s binary: %w", plat, err)
		}
		binGz, binDiffID, err := layer([]file{{name: o.name, mode: 0o755, data: bin}}, o.created)
		if err != nil {
			return fmt.Errorf("writing the %s binary's layer: %w", plat, err)
		}
		binLayer := b.add(mediaLayer, binGz)
		labels := map[string]string{
			"org.opencontainers.image.source":   o.source,
			"org.opencontainers.image.version":  tag,
			"org.opencontainers.image.revision": o.revision,
		}
		config := b.addJSON(mediaConfig, map[string]any{
			"architecture": arch,
			"os":           osName,
			"created":      o.created.Format(time.RFC3339),
			"config": map[string]any{
				"User":       fmt.Sprintf("%d:%d", nonroot, nonroot),
				"Entrypoint": []string{"/" + o.name},
				"Env":        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
				"WorkingDir": "/",
				"Labels":     labels,
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{baseDiffID, binDiffID}},
			"history": []map[string]string{
				{"created": o.created.Format(time.RFC3339), "created_by": "hack/ociimage: distroless-style static nonroot base"},
				{"created": o.created.Format(time.RFC3339), "created_by": "hack/ociimage: COPY " + o.name + " /" + o.name},
			},
		})
		m := b.addJSON(mediaManifest, map[string]any{
			"schemaVersion": 2,
			"mediaType":     mediaManifest,
			"config":        config,
			"layers":        []descriptor{base, binLayer},
			"annotations":   labels,
		})
		m.Platform = &platform{Architecture: arch, OS: osName}
		manifests = append(manifests, m)
		if len(dockerLoad) == 0 {
			dockerLoad = append(dockerLoad, map[string]any{
				"Config":   blobPath(config.Digest),
				"RepoTags": []string{o.ref},
				"Layers":   []string{blobPath(base.Digest), blobPath(binLayer.Digest)},
			})
		}
	}
	index := b.addJSON(mediaIndex, map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests})
	index.Annotations = map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          repository + ":" + tag,
	}
	return writeArchive(o.out, b, index, dockerLoad, o.created)
}

func writeArchive(out string, b blobs, index descriptor, dockerLoad []map[string]any, created time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	put := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	mustJSON := func(v any) []byte { data, _ := json.Marshal(v); return data }
	digests := make([]string, 0, len(b))
	for d := range b {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	err = put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	if err == nil {
		err = put("index.json", mustJSON(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{index}}))
	}
	if err == nil {
		err = put("manifest.json", mustJSON(dockerLoad))
	}
	for _, d := range digests {
		if err == nil {
			err = put(blobPath(d), b[d])
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

func blobPath(digest string) string {
	return path.Join("blobs", strings.Replace(digest, ":", "/", 1))
}

// splitRef splits REPOSITORY:TAG; the tag follows the last colon after the
// last slash (a registry's port does not count).
func splitRef(ref string) (repository, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i <= 0 || strings.Contains(ref[i:], "/") || i == len(ref)-1 {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

func main() {
	var o options
	var created int64
	flag.StringVar(&o.ref, "ref", "", "the image reference, REPOSITORY:TAG (the tag docker load gives it, and the index's ref.name)")
	flag.StringVar(&o.out, "out", "", "the archive to write")
	flag.StringVar(&o.name, "name", "controller-manager", "the binary's name in the image, at its root, and its entrypoint")
	flag.StringVar(&o.caCerts, "ca-certs", "", "a CA bundle to put at /etc/ssl/certs/ca-certificates.crt (none if empty)")
	flag.StringVar(&o.source, "source", "", "the label org.opencontainers.image.source")
	flag.StringVar(&o.revision, "revision", "", "the label org.opencontainers.image.revision (the git commit)")
	flag.Int64Var(&created, "created", 0, "every timestamp, in seconds since the epoch (SOURCE_DATE_EPOCH)")
	flag.Parse()
	o.created = time.Unix(created, 0).UTC()
	o.binaries = flag.Args()
	if o.out == "" {
		fmt.Fprintln(os.Stderr, "ociimage: --out is required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}
