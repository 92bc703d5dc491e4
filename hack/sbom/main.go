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

// Command sbom writes an SPDX 2.3 JSON SBOM of Go binaries from the build
// information the Go linker embeds in them (what `go version -m` prints), so
// it lists exactly the modules linked in, with no tool to download
// (make release):
//
//	go run ./hack/sbom --name controller-manager-v0.1.0 --namespace URL \
//	    linux/amd64=_output/linux-amd64/controller-manager ... > sbom.spdx.json
//
// Each binary is a package (with its SHA-256) that DEPENDS_ON its modules;
// each module, the Go standard library included, is a package with a purl.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

type spdxPackage struct {
	SPDXID           string        `json:"SPDXID"`
	Name             string        `json:"name"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	LicenseConcluded string        `json:"licenseConcluded"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	CopyrightText    string        `json:"copyrightText"`
	PrimaryPurpose   string        `json:"primaryPackagePurpose,omitempty"`
	Checksums        []spdxSum     `json:"checksums,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
}

type spdxSum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name, version string) string {
	return "SPDXRef-" + kind + "-" + unsafeID.ReplaceAllString(name+"-"+version, "-")
}

func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}

func modulePackage(path, version string) spdxPackage {
	return spdxPackage{
		SPDXID: spdxID("Module", path, version), Name: path, VersionInfo: version,
		DownloadLocation: "NOASSERTION", LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
		PrimaryPurpose: "LIBRARY",
		ExternalRefs:   []externalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: purl(path, version)}},
	}
}

func run(name, namespace, mainVersion string, created time.Time, binaries []string) (map[string]any, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("no binary given: name them as os/arch=path")
	}
	packages := map[string]spdxPackage{}
	var binaryIDs []string
	var relationships []relationship
	for _, arg := range binaries {
		plat, file, ok := strings.Cut(arg, "=")
		if !ok || file == "" {
			return nil, fmt.Errorf("binary %q is not os/arch=path", arg)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the %s binary: %w", plat, err)
		}
		info, err := buildinfo.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the build information of %s: %w", file, err)
		}
		sum := sha256.Sum256(data)
		version := info.Main.Version
		if mainVersion != "" {
			version = mainVersion
		}
		main := modulePackage(info.Main.Path, version)
		main.SPDXID = spdxID("Binary", info.Path, plat)
		main.Name = info.Path + " (" + plat + ")"
		main.PrimaryPurpose = "APPLICATION"
		main.Checksums = []spdxSum{{Algorithm: "SHA256", Value: hex.EncodeToString(sum[:])}}
		packages[main.SPDXID] = main
		binaryIDs = append(binaryIDs, main.SPDXID)

		// The standard library, as syft and govulncheck name it.
		deps := []spdxPackage{modulePackage("stdlib", info.GoVersion)}
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			deps = append(deps, modulePackage(m.Path, m.Version))
		}
		for _, d := range deps {
			packages[d.SPDXID] = d
			relationships = append(relationships, relationship{main.SPDXID, "DEPENDS_ON", d.SPDXID})
		}
	}
	ids := make([]string, 0, len(packages))
	for id := range packages {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	list := make([]spdxPackage, 0, len(ids))
	for _, id := range ids {
		list = append(list, packages[id])
	}
	describes := make([]relationship, 0, len(binaryIDs))
	for _, id := range binaryIDs {
		describes = append(describes, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", id})
	}
	return map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              name,
		"documentNamespace": namespace,
		"creationInfo": map[string]any{
			"created":  created.Format(time.RFC3339),
			"creators": []string{"Tool: hack/sbom (debug/buildinfo)"},
		},
		"packages":      list,
		"relationships": append(describes, relationships...),
	}, nil
}

func main() {
	name := flag.String("name", "", "the document's name")
	namespace := flag.String("namespace", "", "the document's unique URI (SPDX documentNamespace)")
	mainVersion := flag.String("main-version", "", "the main module's version (the release's; default: what the build stamped)")
	created := flag.Int64("created", 0, "the creation time, in seconds since the epoch (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if *name == "" || *namespace == "" {
		fmt.Fprintln(os.Stderr, "sbom: --name and --namespace are required")
		os.Exit(2)
	}
	doc, err := run(*name, *namespace, *mainVersion, time.Unix(*created, 0).UTC(), flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(doc); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}
