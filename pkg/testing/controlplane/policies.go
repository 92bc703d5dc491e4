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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// AdmissionPolicies are the admission policies of manifests/policies.
type AdmissionPolicies struct {
	Mutating           []*admissionregistrationv1.MutatingAdmissionPolicy
	MutatingBindings   []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	Validating         []*admissionregistrationv1.ValidatingAdmissionPolicy
	ValidatingBindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// LoadAdmissionPolicies reads every document of the files that
// manifests/policies/kustomization.yaml lists: the App admission policies
// as manifests/default installs them.
func LoadAdmissionPolicies() (*AdmissionPolicies, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "manifests", "policies")
	files, err := kustomizationResources(dir)
	if err != nil {
		return nil, err
	}
	p := &AdmissionPolicies{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", file, err)
			}
			if err := p.add(doc); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
		}
	}
	return p, nil
}

func (p *AdmissionPolicies) add(doc []byte) error {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	var obj any
	switch meta.Kind {
	case "MutatingAdmissionPolicy":
		o := &admissionregistrationv1.MutatingAdmissionPolicy{}
		p.Mutating, obj = append(p.Mutating, o), o
	case "MutatingAdmissionPolicyBinding":
		o := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
		p.MutatingBindings, obj = append(p.MutatingBindings, o), o
	case "ValidatingAdmissionPolicy":
		o := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		p.Validating, obj = append(p.Validating, o), o
	case "ValidatingAdmissionPolicyBinding":
		o := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		p.ValidatingBindings, obj = append(p.ValidatingBindings, o), o
	default:
		return fmt.Errorf("unexpected kind %q", meta.Kind)
	}
	return yaml.UnmarshalStrict(doc, obj)
}

// Install creates the policies and their bindings. A non-nil selector
// replaces every binding's namespaceSelector, so that a test can admit some
// namespaces by policy and the others by webhook.
func (p *AdmissionPolicies) Install(ctx context.Context, client kubernetes.Interface, selector *metav1.LabelSelector) error {
	c := client.AdmissionregistrationV1()
	for _, o := range p.Mutating {
		if _, err := c.MutatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating MutatingAdmissionPolicy %s: %w", o.Name, err)
		}
	}
	for _, o := range p.Validating {
		if _, err := c.ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ValidatingAdmissionPolicy %s: %w", o.Name, err)
		}
	}
	for _, o := range p.MutatingBindings {
		if selector != nil {
			o.Spec.MatchResources.NamespaceSelector = selector
		}
		if _, err := c.MutatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating MutatingAdmissionPolicyBinding %s: %w", o.Name, err)
		}
	}
	for _, o := range p.ValidatingBindings {
		if selector != nil {
			o.Spec.MatchResources.NamespaceSelector = selector
		}
		if _, err := c.ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ValidatingAdmissionPolicyBinding %s: %w", o.Name, err)
		}
	}
	return nil
}

// TypeCheckWarnings are the warnings the API server's type checking of the
// validating policies reports, by policy name: a misspelt field shows here.
func TypeCheckWarnings(ctx context.Context, client kubernetes.Interface, p *AdmissionPolicies) (map[string][]string, error) {
	out := map[string][]string{}
	for _, o := range p.Validating {
		got, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if got.Status.TypeChecking == nil || got.Status.ObservedGeneration != got.Generation {
			return nil, fmt.Errorf("ValidatingAdmissionPolicy %s is not type-checked yet", o.Name)
		}
		for _, w := range got.Status.TypeChecking.ExpressionWarnings {
			out[o.Name] = append(out[o.Name], w.FieldRef+": "+w.Warning)
		}
	}
	return out, nil
}

// Delete deletes the bindings, then the policies; absent ones are fine.
func (p *AdmissionPolicies) Delete(ctx context.Context, client kubernetes.Interface) error {
	c := client.AdmissionregistrationV1()
	var errs []error
	ignore := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, o := range p.MutatingBindings {
		ignore(c.MutatingAdmissionPolicyBindings().Delete(ctx, o.Name, metav1.DeleteOptions{}))
	}
	for _, o := range p.ValidatingBindings {
		ignore(c.ValidatingAdmissionPolicyBindings().Delete(ctx, o.Name, metav1.DeleteOptions{}))
	}
	for _, o := range p.Mutating {
		ignore(c.MutatingAdmissionPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{}))
	}
	for _, o := range p.Validating {
		ignore(c.ValidatingAdmissionPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{}))
	}
	return errors.Join(errs...)
}
