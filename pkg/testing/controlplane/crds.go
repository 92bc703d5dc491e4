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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// CRDs reads, strictly, the CustomResourceDefinitions that
// manifests/crd/kustomization.yaml lists, in its order.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "manifests", "crd")
	files, err := kustomizationResources(dir)
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", file, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// kustomizationResources lists the files of dir/kustomization.yaml's
// resources, in its order; none is an error.
func kustomizationResources(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		return nil, fmt.Errorf("parsing %s/kustomization.yaml: %w", dir, err)
	}
	if len(kustomization.Resources) == 0 {
		return nil, fmt.Errorf("%s/kustomization.yaml lists no resources", dir)
	}
	return kustomization.Resources, nil
}

// InstallCRDs creates crds, leaving any that exist, and waits until every
// one is established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var names []string
	for _, crd := range crds {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	return WaitForCRDs(ctx, client, time.Minute, names...)
}

// WaitForCRDs waits up to timeout until every named CRD is established. A
// CRD whose names the API server did not accept fails at once: it never
// will be established.
func WaitForCRDs(ctx context.Context, client apiextensionsclient.Interface, timeout time.Duration, names ...string) error {
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil // not visible yet, or a blip
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("names of CRD %s not accepted: %s", name, c.Message)
				}
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	return nil
}
