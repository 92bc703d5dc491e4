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

package chart

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// bundles are the caBundles of the chart's webhook configurations and CRDs,
// and their owner marker, by object.
type bundles map[string]string

func readBundles(ctx context.Context, t *testing.T) bundles {
	t.Helper()
	out := bundles{}
	kube := cp.Client.AdmissionregistrationV1()
	m, err := kube.MutatingWebhookConfigurations().Get(ctx, "ndsl-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		out["mutating "+w.Name] = string(w.ClientConfig.CABundle)
	}
	out["mutating owner"] = m.Annotations[certs.CABundleOwnerAnnotation]
	v, err := kube.ValidatingWebhookConfigurations().Get(ctx, "ndsl-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Webhooks {
		out["validating "+w.Name] = string(w.ClientConfig.CABundle)
	}
	out["validating owner"] = v.Annotations[certs.CABundleOwnerAnnotation]
	for _, crd := range chartCRDs(ctx, t) {
		out["crd "+crd.Name] = string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle)
		out["crd "+crd.Name+" owner"] = crd.Annotations[certs.CABundleOwnerAnnotation]
	}
	return out
}

func chartCRDs(ctx context.Context, t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, name := range []string{"apps.ingress.example.com", "pipelines.distri-infer.ndsl.cn"} {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *crd)
	}
	return out
}

// Issue 23: helm install puts the chart into a namespace of the user's on a
// real kube-apiserver (every object valid), the manager fills in the
// caBundles, and helm upgrade, by three-way merge (Helm 3's way, and Helm
// 4's --server-side=false) and by server-side apply (Helm 4's default),
// changes every object yet leaves the caBundles and their owner marker as
// the manager wrote them, owned by no field manager. helm uninstall keeps
// the CRDs.
func TestChartInstallUpgradeKeepsCABundles(t *testing.T) {
	const ns = "platform"
	ctx := context.Background()
	kubeconfig := cp.KubeconfigPath
	installing(t, ns)
	values := map[string]any{
		"cleanup": map[string]any{"enabled": true},
		"metrics": map[string]any{"dashboard": map[string]any{"enabled": true},
			"readers": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}}},
	}
	// The Pipelines' namespace, as an earlier version's controller created
	// it: the chart leaves it alone rather than fail to adopt it.
	pipelineNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pipeline", Labels: map[string]string{"app.kubernetes.io/managed-by": "ndsl-controller-manager"}}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, pipelineNS, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if out, err := helm(t, "install", release, chartDir(t), "--kubeconfig", kubeconfig, "--namespace", ns, "--create-namespace",
		"-f", valuesFile(t, values)); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	for _, crd := range chartCRDs(ctx, t) {
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter || !crd.Spec.Versions[0].Served {
			t.Errorf("CRD %s installed without v1 served through the conversion webhook: %+v", crd.Name, crd.Spec.Conversion)
		}
	}

	// The manager's certificate writer, in the release's namespace, with
	// the default names the chart uses: it fills in every caBundle.
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{}
		o.Webhook.Enabled = true
		o.Webhook.Port = 0
		o.Webhook.Namespace = ns
	})
	var injected bundles
	framework.Eventually(t, 60*time.Second, "the manager to fill in every caBundle", func(ctx context.Context) (bool, error) {
		injected = readBundles(ctx, t)
		for k, v := range injected {
			if v == "" {
				return false, fmt.Errorf("%s is empty", k)
			}
		}
		return true, nil
	})
	// Stopped, so that it cannot repair what an upgrade would remove.
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}

	for i, upgrade := range []struct {
		apply     string
		operation metav1.ManagedFieldsOperationType
	}{{"--server-side=false", metav1.ManagedFieldsOperationUpdate}, {"--server-side=true", metav1.ManagedFieldsOperationApply}} {
		apply := upgrade.apply
		label := fmt.Sprintf("upgrade-%d", i)
		values["commonLabels"] = map[string]any{"chart-test/upgraded": label}
		if out, err := helm(t, "upgrade", release, chartDir(t), "--kubeconfig", kubeconfig, "--namespace", ns, apply,
			"-f", valuesFile(t, values)); err != nil {
			t.Fatalf("helm upgrade %s: %v\n%s", apply, err, out)
		}
		// The upgrade did patch them: the new label is there.
		for _, crd := range chartCRDs(ctx, t) {
			if crd.Labels["chart-test/upgraded"] != label {
				t.Fatalf("helm upgrade %s: CRD %s labels %v, want chart-test/upgraded=%s", apply, crd.Name, crd.Labels, label)
			}
		}
		v, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "ndsl-controller-manager", metav1.GetOptions{})
		if err != nil || v.Labels["chart-test/upgraded"] != label {
			t.Fatalf("helm upgrade %s: ValidatingWebhookConfiguration labels %v (%v), want chart-test/upgraded=%s", apply, v.Labels, err, label)
		}
		// And by the way asked for: a three-way merge patch (operation
		// Update) or a server-side apply.
		helmWrote := false
		for _, f := range v.ManagedFields {
			helmWrote = helmWrote || (f.Manager == "helm" && f.Operation == upgrade.operation)
		}
		if !helmWrote {
			t.Errorf("helm upgrade %s: no managedFields entry of helm with operation %s: %+v", apply, upgrade.operation, managers(v.ManagedFields))
		}
		after := readBundles(ctx, t)
		for k, v := range injected {
			if after[k] != v {
				t.Errorf("helm upgrade %s changed %s: %.60q, want the manager's %.60q", apply, k, after[k], v)
			}
		}
		// Owned by no one: not helm's, and not the manager's, which would
		// keep alive a webhook a later upgrade removes
		// (TestChartServerSideUpgradeRemovesWebhooks).
		for _, f := range v.ManagedFields {
			if bytes.Contains(f.FieldsV1.Raw, []byte("caBundle")) {
				t.Errorf("helm upgrade %s: %s %s owns the caBundle, want no one", apply, f.Manager, f.Operation)
			}
		}
	}

	if out, err := helm(t, "uninstall", release, "--kubeconfig", kubeconfig, "--namespace", ns); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	chartCRDs(ctx, t) // fails the test if one is gone
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, pipelineNS.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("after helm uninstall the Pipelines' namespace: %v; want it kept", err)
	}
	if _, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "controller-manager", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall the Deployment is still there (%v)", err)
	}
}

func managers(fields []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, f := range fields {
		out = append(out, f.Manager+" "+string(f.Operation))
	}
	return out
}
