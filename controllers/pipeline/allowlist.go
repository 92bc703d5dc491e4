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

package pipeline

import (
	"fmt"
	"net"
	"path"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The allowlists bound what the controller, with its cluster-wide rights,
// writes on behalf of whoever may create a Pipeline: which NFS exports
// become PersistentVolumes and which images run. An empty list allows
// everything, so that the design notes' samples work on a fresh install.

// nfsExport is one entry of --pipeline-allowed-nfs: a server and a share
// prefix ("/" for every share).
type nfsExport struct {
	server, share string
}

// parseNFSExport reads SERVER or SERVER:/share/prefix. A server has no "/",
// so the first ":/" starts the share, even after an IPv6 address.
func parseNFSExport(entry string) (nfsExport, error) {
	server, share, hasShare := strings.Cut(entry, ":/")
	share = "/" + share
	switch {
	case server == "":
		return nfsExport{}, fmt.Errorf("%q names no server; want SERVER or SERVER:/share/prefix", entry)
	case !validServer(server):
		return nfsExport{}, fmt.Errorf("%q: %q is not a host name or IP address; want SERVER or SERVER:/share/prefix", entry, server)
	case !hasShare:
		return nfsExport{server: server, share: "/"}, nil
	case hasDotDot(share):
		return nfsExport{}, fmt.Errorf("%q: the share prefix must not contain \"..\"", entry)
	}
	return nfsExport{server: server, share: path.Clean(share)}, nil
}

// validServer reports whether server is an IP address (IPv6 with or without
// brackets) or a DNS name.
func validServer(server string) bool {
	if net.ParseIP(unbracketed(server)) != nil {
		return true
	}
	return len(validation.IsDNS1123Subdomain(strings.ToLower(server))) == 0
}

// sameServer compares host names without case and IPv6 addresses with or
// without brackets.
func sameServer(a, b string) bool {
	return strings.EqualFold(unbracketed(a), unbracketed(b))
}

func unbracketed(server string) string {
	if strings.HasPrefix(server, "[") && strings.HasSuffix(server, "]") {
		return server[1 : len(server)-1]
	}
	return server
}

// hasDotDot reports whether p has a ".." segment.
func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// allows reports whether the export covers share on server: the same server
// (see sameServer) and the share at or below the prefix, on
// path-segment boundaries. A share with ".." is never allowed: the server,
// not this check, would resolve it.
func (e nfsExport) allows(server, share string) bool {
	if !sameServer(e.server, server) || !strings.HasPrefix(share, "/") || hasDotDot(share) {
		return false
	}
	share = path.Clean(share)
	return e.share == "/" || share == e.share || strings.HasPrefix(share, e.share+"/")
}

// validateAllowedNFS checks every --pipeline-allowed-nfs entry.
func validateAllowedNFS(entries []string) error {
	for _, entry := range entries {
		if _, err := parseNFSExport(entry); err != nil {
			return fmt.Errorf("--pipeline-allowed-nfs: %w", err)
		}
	}
	return nil
}

// nfsRefusal is nil when allowed (validated entries) lets a Pipeline mount
// share from server, and otherwise says what is allowed.
func nfsRefusal(allowed []string, server, share string) error {
	if len(allowed) == 0 {
		return nil
	}
	for _, entry := range allowed {
		if e, err := parseNFSExport(entry); err == nil && e.allows(server, share) {
			return nil
		}
	}
	return fmt.Errorf("NFS export %s:%s is not allowed for Pipelines; allowed (--pipeline-allowed-nfs): %s",
		server, share, strings.Join(allowed, ", "))
}

// serverListed reports whether some entry of allowed names server, so
// that a refusal can point at the share rather than the server.
func serverListed(allowed []string, server string) bool {
	for _, entry := range allowed {
		if e, err := parseNFSExport(entry); err == nil && sameServer(e.server, server) {
			return true
		}
	}
	return false
}

// validateAllowedImages checks every --pipeline-allowed-images prefix: a
// registry ("registry.example.com/") or a repository
// ("docker.io/library/nginx"), written as the kubelet resolves references,
// so that "nginx" is not silently read as a registry.
func validateAllowedImages(prefixes []string) error {
	for _, prefix := range prefixes {
		if err := validateImagePrefix(prefix); err != nil {
			return fmt.Errorf("--pipeline-allowed-images: %w", err)
		}
	}
	return nil
}

func validateImagePrefix(prefix string) error {
	repo := strings.TrimSuffix(prefix, "/")
	if strings.HasSuffix(prefix, "/") && repo != "" {
		// A registry or an organisation under one (docker.io/library/,
		// quay.io/team/): what the kubelet makes of a repository below it.
		named, err := reference.ParseNormalizedNamed(repo + "/x")
		switch {
		case err != nil:
			return fmt.Errorf("%q is not a repository prefix: %v", prefix, err)
		case reference.Domain(named) == repo || named.Name() == repo+"/x":
			return nil
		case strings.Contains(repo, "/") || strings.ContainsAny(repo, ".:") || repo == "localhost":
			return fmt.Errorf("%q is not written as the kubelet resolves it; write %q", prefix, strings.TrimSuffix(named.Name(), "x"))
		}
		// One bare name: a registry without a dot, or a Docker Hub
		// organisation; neither is what the user can mean unambiguously.
		return fmt.Errorf("%q is neither a registry (registry.example.com/) nor an organisation with its registry (docker.io/%s/)", prefix, repo)
	}
	if !strings.Contains(repo, "/") {
		// A registry alone: it must read as one, with a path after it.
		named, err := reference.ParseNormalizedNamed(repo + "/x")
		if err != nil || reference.Domain(named) != repo {
			return fmt.Errorf("%q is neither a registry (registry.example.com/) nor a repository with its registry (docker.io/library/nginx)", prefix)
		}
		return nil
	}
	named, err := reference.ParseNormalizedNamed(repo)
	if err != nil {
		return fmt.Errorf("%q is not a repository prefix: %v", prefix, err)
	}
	if named.Name() != repo {
		return fmt.Errorf("%q is not written as the kubelet resolves it; write %q", prefix, named.Name())
	}
	return nil
}

// imageRefusal is nil when allowed (validated prefixes) lets a step run
// image, and otherwise says what is allowed. The image is compared as the
// kubelet resolves it: "nginx:latest" is docker.io/library/nginx:latest.
// A prefix ending in "/" matches as it is; any other ends at a path
// segment, a tag or a digest, so docker.io/library/nginx does not allow
// docker.io/library/nginx-evil, and a registry alone does not allow the
// same host on another port. An image ID or a bare digest is refused even
// without a list: it names no repository, and containerd runs whatever image
// the node has cached under it, pulled with another team's credentials, say.
func imageRefusal(allowed []string, image string) error {
	if ref, err := reference.ParseAnyReference(image); err == nil {
		if _, named := ref.(reference.Named); !named {
			err := fmt.Errorf("image %q names no repository: an image ID or a bare digest runs whatever the node has cached under it; name the repository, as in registry.example.com/team/model@sha256:<digest>", image)
			if len(allowed) > 0 {
				err = fmt.Errorf("%w; allowed prefixes (--pipeline-allowed-images): %s", err, strings.Join(allowed, ", "))
			}
			return err
		}
	}
	if len(allowed) == 0 {
		return nil
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Errorf("image %q is not a valid image reference (%v); allowed prefixes (--pipeline-allowed-images): %s",
			image, err, strings.Join(allowed, ", "))
	}
	full := named.String()
	for _, prefix := range allowed {
		if imagePrefixMatches(prefix, full) {
			return nil
		}
	}
	return fmt.Errorf("image %s (%s) is not allowed for Pipelines; allowed prefixes (--pipeline-allowed-images): %s",
		image, full, strings.Join(allowed, ", "))
}

func imagePrefixMatches(prefix, image string) bool {
	if !strings.HasPrefix(image, prefix) {
		return false
	}
	if strings.HasSuffix(prefix, "/") || len(image) == len(prefix) {
		return true
	}
	next := image[len(prefix)]
	if !strings.Contains(prefix, "/") {
		return next == '/' // a registry: its port is part of it
	}
	return next == '/' || next == ':' || next == '@'
}
