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

// Package crds is the manager's crds subcommand: the install and uninstall
// steps of the App and Pipeline CRDs that the Helm chart's hook Jobs run.
package crds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/pkg/certs"
)

// Usage is the subcommand's --help.
const Usage = `controller-manager crds: install and uninstall steps for the App and Pipeline
CRDs, run by the Helm chart's hook Jobs and by make undeploy KEEP_CRDS=1.

Usage:
  controller-manager crds apply --dir DIR [--kubeconfig FILE]
      Server-side apply every CRD in DIR/*.yaml (field manager
      controller-manager-crds), annotated helm.sh/resource-policy=keep, and
      wait until each is established. A reinstall in any namespace takes the
      CRDs over this way: they are no release's resources.
  controller-manager crds release --crd NAME... [--kubeconfig FILE]
      Before the manager goes: leave each CRD serving only its storage
      version, with conversion None (no webhook needed to read or delete its
      objects), and without the caBundle owner annotation. Refuses while
      objects are stored at another version (status.storedVersions).
  controller-manager crds delete --crd NAME... [--kubeconfig FILE]
      Delete the CRDs, and with them every App and Pipeline.
`

// crdFieldManager names the writes of the crds subcommand in managedFields.
const crdFieldManager = "controller-manager-crds"

// Run runs one crds step (args as after "controller-manager crds")
// against cfg; --kubeconfig is ignored. The chart's tests run its hook
// Jobs' args through it.
func Run(ctx context.Context, cfg *rest.Config, args []string) error {
	step, err := Parse(args)
	if err != nil {
		return err
	}
	return step.Run(ctx, cfg)
}

// Step is one parsed crds command line.
type Step struct {
	// Kubeconfig is --kubeconfig, empty when not given.
	Kubeconfig string
	name, dir  string
	crds       []string
}

// Parse parses a crds command line (args as after "controller-manager crds").
func Parse(args []string) (*Step, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return nil, errors.New("crds: want a step first: apply, release or delete (see crds --help)")
	}
	s := &Step{name: args[0]}
	fs := pflag.NewFlagSet("crds "+s.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&s.dir, "dir", "", "Directory of the CRD manifests to apply.")
	fs.StringSliceVar(&s.crds, "crd", nil, "Name of a CRD to release or delete; repeatable.")
	fs.StringVar(&s.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty: in-cluster, else $KUBECONFIG.")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, fmt.Errorf("crds %s: %w", s.name, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("crds %s: unexpected arguments %q", s.name, fs.Args())
	}
	switch {
	case s.name != "apply" && s.name != "release" && s.name != "delete":
		return nil, fmt.Errorf("crds: unknown step %q; want apply, release or delete", s.name)
	case s.name == "apply" && s.dir == "":
		return nil, errors.New("crds apply: --dir is required")
	case s.name != "apply" && len(s.crds) == 0:
		return nil, fmt.Errorf("crds %s: --crd is required", s.name)
	}
	return s, nil
}

// Run runs the step against cfg.
func (s *Step) Run(ctx context.Context, cfg *rest.Config) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	if s.name == "apply" {
		return applyCRDs(ctx, crds, s.dir)
	}
	for _, name := range s.crds {
		if s.name == "release" {
			err = releaseCRD(ctx, crds, name)
		} else if err = crds.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("crds %s %s: %w", s.name, name, err)
		}
		klog.FromContext(ctx).Info("Done", "step", s.name, "crd", name)
	}
	return nil
}

type crdClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*apiextensionsv1.CustomResourceDefinition, error)
}

// applyCRDs server-side applies each CRD in dir. helm.sh/resource-policy=keep
// stops a helm upgrade from a chart that had them as release resources
// from deleting them (and every App and Pipeline) as no longer rendered.
func applyCRDs(ctx context.Context, crds crdClient, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("crds apply: no *.yaml in %s (%v)", dir, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return fmt.Errorf("crds apply: parsing %s: %w", file, err)
		}
		if obj["kind"] != "CustomResourceDefinition" {
			return fmt.Errorf("crds apply: %s holds a %v, not a CustomResourceDefinition", file, obj["kind"])
		}
		delete(obj, "status")
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		annotations, _ := meta["annotations"].(map[string]any)
		if annotations == nil {
			annotations = map[string]any{}
		}
		annotations["helm.sh/resource-policy"] = "keep"
		meta["annotations"] = annotations
		body, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		if _, err := crds.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: crdFieldManager, Force: ptr.To(true)}); err != nil {
			return fmt.Errorf("crds apply: %s: %w", name, err)
		}
		if err := releaseVersions(ctx, crds, name); err != nil {
			return fmt.Errorf("crds apply: %s: %w", name, err)
		}
		if err := waitEstablished(ctx, crds, name); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Applied", "crd", name)
	}
	return nil
}

// releaseVersions drops spec.versions from what this step's apply owns. A
// helm rollback or upgrade to a chart version that has the CRDs as release
// resources applies them server-side without forcing: after a release
// that changed the versions (the Apps' storage version), it would conflict
// with this step on that atomic list and fail. Each apply here sets the
// whole list again, so owning it afterwards buys nothing.
func releaseVersions(ctx context.Context, crds crdClient, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, entry := range crd.ManagedFields {
			if entry.Manager != crdFieldManager || entry.Operation != metav1.ManagedFieldsOperationApply || entry.FieldsV1 == nil {
				continue
			}
			var fields map[string]any
			if err := json.Unmarshal(entry.FieldsV1.Raw, &fields); err != nil {
				return fmt.Errorf("reading the fields it applied: %w", err)
			}
			spec, _ := fields["f:spec"].(map[string]any)
			if _, ok := spec["f:versions"]; !ok {
				return nil
			}
			delete(spec, "f:versions")
			raw, err := json.Marshal(fields)
			if err != nil {
				return err
			}
			crd.ManagedFields[i].FieldsV1 = &metav1.FieldsV1{Raw: raw}
			_, err = crds.Update(ctx, crd, metav1.UpdateOptions{FieldManager: crdFieldManager})
			return err
		}
		return nil
	})
}

func waitEstablished(ctx context.Context, crds crdClient, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("crds apply: waiting for %s to be established: %w", name, err)
	}
	return nil
}

// releaseCRD leaves crd readable with no webhook: served is not
// storedVersions, so the API server lets a version stop being served while
// objects exist, and every read, list and delete is then at the storage
// version, with nothing to convert. It refuses while status.storedVersions
// names another version than the storage version. The caBundle goes with
// the webhook, and with it the certificate writer's managedFields entry;
// the owner annotation goes too, so that the next install writes its own.
func releaseCRD(ctx context.Context, crds crdClient, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Info("No such CRD; nothing to release", "crd", name)
			return nil
		}
		if err != nil {
			return err
		}
		storage := ""
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			v.Served = v.Storage
			if v.Storage {
				storage = v.Name
			}
		}
		if storage == "" {
			return fmt.Errorf("no storage version")
		}
		// Objects stored at another version would be read as the storage
		// version without conversion: wrong data.
		others := slices.DeleteFunc(slices.Clone(crd.Status.StoredVersions), func(v string) bool { return v == storage })
		if len(others) > 0 {
			return fmt.Errorf("objects are still stored as %s (status.storedVersions %v); run the manager until it has migrated them, "+
				"or hack/migrate-storage.sh, then retry", strings.Join(others, ", "), crd.Status.StoredVersions)
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		delete(crd.Annotations, certs.CABundleOwnerAnnotation)
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{FieldManager: crdFieldManager})
		return err
	})
}

// Main runs the crds subcommand with args, loading the client config of
// --kubeconfig with loadConfig.
func Main(args []string, loadConfig func(kubeconfig string) (*rest.Config, error)) error {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Print(Usage)
		return nil
	}
	step, err := Parse(args)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(step.Kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return step.Run(klog.NewContext(ctx, klog.Background()), cfg)
}
