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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// pipelineWebhook is the webhook the "single webhook removed" upgrade drops.
const pipelineWebhook = "validate.pipelines.distri-infer.ndsl.cn"

// Issue 37: a server-side helm upgrade (Helm 4's default) that turns the
// webhooks off, or drops one webhook, succeeds although the manager has
// written the caBundles: its ownership of them must not keep alive the
// entries (or the CRDs' conversion) helm removes, which would then be
// invalid. Both ways, with the manager running throughout: off and on
// again, and one webhook removed and restored, each restored target gets
// its caBundle back.
func TestChartServerSideUpgradeRemovesWebhooks(t *testing.T) {
	const ns = "platform"
	ctx := context.Background()
	kubeconfig := cp.KubeconfigPath
	upgrade := func(step, chart string, values map[string]any) {
		t.Helper()
		if out, err := helm(t, "upgrade", release, chart, "--install", "--server-side=true", "--kubeconfig", kubeconfig,
			"--namespace", ns, "--create-namespace", "-f", valuesFile(t, values)); err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
	}
	installing(t, ns)
	// Explicit: helm upgrade reuses the last release's values when given none.
	on := map[string]any{"webhooks": map[string]any{"enabled": true}}
	off := map[string]any{"webhooks": map[string]any{"enabled": false}}

	upgrade("helm install", chartDir(t), on)
	framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{}
		o.Webhook.Enabled = true
		o.Webhook.Port = 0
		o.Webhook.Namespace = ns
	})
	waitForBundles := func(step string) {
		t.Helper()
		framework.Eventually(t, 60*time.Second, step+": the manager to fill in every caBundle", func(ctx context.Context) (bool, error) {
			for k, v := range readBundles(ctx, t) {
				if v == "" {
					return false, fmt.Errorf("%s is empty", k)
				}
			}
			return true, nil
		})
	}
	waitForBundles("after install")

	upgrade("helm upgrade, webhooks off", chartDir(t), off)
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "ndsl-controller-manager", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("webhooks off: ValidatingWebhookConfiguration still there (%v)", err)
	}
	for _, crd := range chartCRDs(ctx, t) {
		if c := crd.Spec.Conversion; c != nil && (c.Strategy != apiextensionsv1.NoneConverter || c.Webhook != nil) {
			t.Errorf("webhooks off: CRD %s conversion %+v, want none", crd.Name, c)
		}
	}
	upgrade("helm upgrade, webhooks on again", chartDir(t), on)
	waitForBundles("webhooks on again")

	upgrade("helm upgrade, one webhook removed", chartWithout(t, pipelineWebhook), on)
	v, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "ndsl-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Webhooks {
		if w.Name == pipelineWebhook {
			t.Errorf("one webhook removed: %s is still there", w.Name)
		}
	}
	upgrade("helm upgrade, the webhook restored", chartDir(t), on)
	waitForBundles("the webhook restored")
}

// chartWithout copies the chart with the validating webhook named webhook
// (the last of templates/webhooks.yaml) cut out, as a later chart version
// that drops one would.
func chartWithout(t *testing.T, webhook string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "controller-manager")
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "templates", "webhooks.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "  - name: "+webhook+"\n")
	end := strings.LastIndex(text, "{{- end }}")
	if start < 0 || end < start {
		t.Fatalf("%s: webhook %s is not the last one", path, webhook)
	}
	if err := os.WriteFile(path, []byte(text[:start]+text[end:]), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
