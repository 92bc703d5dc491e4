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

package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Versions of the binaries this package runs. They name the directories under
// Options.BinDir that hack/build-controlplane.sh fills.
const (
	KubeVersion = "v1.36.3"
	EtcdVersion = "v3.6.16"
	KwokVersion = "v0.7.0"
)

// ModulePath is the module whose go.mod marks the repository root.
const ModulePath = "github.com/ndsl/controller-manager"

// BinDirEnv overrides the default Options.BinDir.
const BinDirEnv = "CONTROLPLANE_BIN_DIR"

// Options says which components to run and where.
type Options struct {
	// BinDir is the root of the version-keyed binary directories
	// (kube-v1.36.3/, etcd-v3.6.16/, kwok-v0.7.0/). Default: $CONTROLPLANE_BIN_DIR,
	// else <repo root>/hack/bin, the repo root being the nearest directory above
	// the working directory whose go.mod declares ModulePath.
	BinDir string
	// Dir holds all state (etcd data, certificates, kubeconfigs, logs).
	// Default: a fresh temporary directory, removed by Stop. A given Dir is kept.
	Dir string
	// ControllerManager also runs kube-controller-manager with all controllers
	// (garbage collector, deployment, replicaset, serviceaccount, ...).
	ControllerManager bool
	// ControllerManagerArgs are extra kube-controller-manager flags, added
	// after this package's own so that they win over them, e.g.
	// --horizontal-pod-autoscaler-sync-period=1s for a quick HPA.
	ControllerManagerArgs []string
	// APIServerArgs are extra kube-apiserver flags, added after this
	// package's own so that they win over them, e.g.
	// --feature-gates=CBORServingAndStorage=true for an alpha API path.
	APIServerArgs []string
	// Scheduler also runs kube-scheduler.
	Scheduler bool
	// Kwok also runs kwok, which fakes the kubelets of Nodes annotated
	// kwok.x-k8s.io/node=fake (see ControlPlane.CreateFakeNodes).
	Kwok bool
	// Fsync keeps etcd's fsync on. The default (false) runs etcd with
	// --unsafe-no-fsync for fast tests; benchmarks should set it.
	Fsync bool
	// Logs receives every component's output, each line prefixed with the
	// component's name. Default: one file per component, <Dir>/<component>.log.
	Logs io.Writer
	// AuditPolicy, when not empty, is an audit policy (YAML) for
	// kube-apiserver, which then writes JSON lines to AuditLogPath.
	AuditPolicy string
}

// binaries are the absolute paths of the executables a control plane needs.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler, kwok, kubectl string
}

// binaryPaths returns where the executables live under binDir, or under the
// default root when binDir is empty. It does not check that they exist.
func binaryPaths(binDir string) (binaries, error) {
	root := binDir
	if root == "" {
		root = os.Getenv(BinDirEnv)
	}
	if root == "" {
		repo, err := RepoRoot()
		if err != nil {
			return binaries{}, fmt.Errorf("finding the binary directory (set Options.BinDir or $%s): %w", BinDirEnv, err)
		}
		root = filepath.Join(repo, "hack", "bin")
	}
	kube := filepath.Join(root, "kube-"+KubeVersion)
	return binaries{
		etcd:              filepath.Join(root, "etcd-"+EtcdVersion, "etcd"),
		apiserver:         filepath.Join(kube, "kube-apiserver"),
		controllerManager: filepath.Join(kube, "kube-controller-manager"),
		scheduler:         filepath.Join(kube, "kube-scheduler"),
		kwok:              filepath.Join(root, "kwok-"+KwokVersion, "kwok"),
		kubectl:           filepath.Join(kube, "kubectl"),
	}, nil
}

// resolveBinaries finds the executables opts asks for and fails with one error
// naming all missing ones.
func resolveBinaries(opts Options) (binaries, error) {
	b, err := binaryPaths(opts.BinDir)
	if err != nil {
		return binaries{}, err
	}
	needed := []string{b.etcd, b.apiserver}
	if opts.ControllerManager {
		needed = append(needed, b.controllerManager)
	}
	if opts.Scheduler {
		needed = append(needed, b.scheduler)
	}
	if opts.Kwok {
		needed = append(needed, b.kwok)
	}
	if err := checkExecutables(needed...); err != nil {
		return binaries{}, err
	}
	return b, nil
}

// checkExecutables fails, naming every missing file, unless all paths are
// executable files.
func checkExecutables(paths ...string) error {
	var missing []string
	for _, path := range paths {
		if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, path)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control plane binaries missing: %s; build them with hack/build-controlplane.sh (or make controlplane)", strings.Join(missing, ", "))
	}
	return nil
}

// KubectlPath returns the kubectl built beside the control plane binaries
// under binDir (empty: the default described at Options.BinDir).
func KubectlPath(binDir string) (string, error) {
	b, err := binaryPaths(binDir)
	if err != nil {
		return "", err
	}
	if err := checkExecutables(b.kubectl); err != nil {
		return "", err
	}
	return b.kubectl, nil
}

// RepoRoot walks up from the working directory to the directory whose go.mod
// declares module ModulePath.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of module " + ModulePath + " above the working directory")
		}
		dir = parent
	}
}

// modulePathOf returns the module path a go.mod declares, or "" if the file
// cannot be read or has no module line.
func modulePathOf(goMod string) string {
	f, err := os.Open(goMod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`)
		}
	}
	return ""
}
