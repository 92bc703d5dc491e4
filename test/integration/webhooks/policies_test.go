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

package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// Namespaces labelled admittedBy=policy are admitted by manifests/policies
// alone; every other namespace by the webhooks. The test's own label, so
// that one API server holds both paths side by side.
const (
	admittedByLabel = "webhooks.ndsl.test/admitted-by"
	byPolicy        = "policy"
)

var (
	notByPolicy = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: admittedByLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{byPolicy}},
	}}
	onlyByPolicy = &metav1.LabelSelector{MatchLabels: map[string]string{admittedByLabel: byPolicy}}
)

// installPolicies installs manifests/policies bound to the policy
// namespaces (Apps) and labelled Pipelines (pipelinePolicies), and waits
// until the API server enforces the App policies.
func installPolicies(ctx context.Context) error {
	policies, err := controlplane.LoadAdmissionPolicies()
	if err != nil {
		return err
	}
	if err := installPipelineAgreement(ctx); err != nil {
		return err
	}
	if err := pipelinePolicies(policies); err != nil {
		return err
	}
	if err := policies.Install(ctx, cp.Client, onlyByPolicy); err != nil {
		return err
	}
	ns := "policy-probe"
	if err := createNamespace(ctx, ns, byPolicy); err != nil {
		return err
	}
	// Active once a refusal, a mutation and a warning show: the API server
	// loads each policy and binding asynchronously.
	warned, warnings, err := clientAs("")
	if err != nil {
		return err
	}
	var last string
	err = pollUntil(ctx, func(ctx context.Context) (bool, error) {
		bad := annotatedApp("v1beta1", "probe", map[string]any{"image": "Not A Reference", "enable_service": true}, nil)
		_, err := dyn.Resource(appsV1beta1).Namespace(ns).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'ndsl-app-validation'") {
			last = fmt.Sprintf("a bad image was not refused by the policy: %v", err)
			return false, nil
		}
		good := annotatedApp("v1beta1", "probe", map[string]any{"image": "nginx:1", "enable_service": true}, nil)
		warnings.take()
		got, err := warned.Resource(appsV1beta1).Namespace(ns).Create(ctx, good, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = fmt.Sprintf("a good App was refused: %v", err)
			return false, nil
		}
		if _, inverted := got.GetAnnotations()[requestedAnnotation]; !inverted {
			last = "a good App was not mutated"
			return false, nil
		}
		said := warnings.take()
		last = fmt.Sprintf("the inversion was not warned of: %q", said)
		return slices.ContainsFunc(said, func(w string) bool { return strings.Contains(w, "spec.enable_ingress was set to") }), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the policies to act (%s): %w", last, err)
	}
	return nil
}

func createNamespace(ctx context.Context, name, admittedBy string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{admittedByLabel: admittedBy}}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// annotatedApp is appObject with annotations; nil sets none.
func annotatedApp(version, name string, spec map[string]any, annotations map[string]string) *unstructured.Unstructured {
	u := appObject(version, name, spec)
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}
