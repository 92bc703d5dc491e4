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

package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	longCA   = 365 * 24 * time.Hour
	longCert = 90 * 24 * time.Hour
)

// Two replicas starting at once race to create the certificate Secret: one
// creates it, the other reads it, and both serve its certificate, which the
// caBundles trust. The API server then calls the webhooks through the
// balancer: mutation, validation with a field error, and conversion both
// ways. At rest, changes to the targets cost no writes.
func TestReplicasShareOneCertificateAndServeTheAPIServer(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r1 := e.startReplica(cp.Config, longCA, longCert)
	r2 := e.startReplica(cp.Config, longCA, longCert)
	e.lb.Set(r1.addr, r2.addr)
	e.waitReady(r1, r2)
	e.waitBundlesMatchSecret()

	data, err := e.secret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := certutil.ParseCertsPEM(data[certs.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*replica{r1, r2} {
		framework.Eventually(t, 30*time.Second, "replica "+r.addr+" to serve the Secret's certificate", func(context.Context) (bool, error) {
			leaf, err := servedLeaf(r.addr, data[certs.CABundleKey])
			return err == nil && leaf.Equal(stored[0]), err
		})
	}

	e.waitAdmissionWorks()
	widgets := e.widgets.Namespace(e.ns)
	created, err := widgets.Create(ctx, e.widget("small", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetLabels()[mutatedLabel] != "true" {
		t.Errorf("the mutating webhook's label is missing: %v", created.GetLabels())
	}

	_, err = widgets.Create(ctx, e.widget("negative", -1), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.size") || !strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("negative size: got %v, want 422 Invalid naming spec.size", err)
	}
	if _, err := widgets.Get(ctx, "negative", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the rejected Widget exists: %v", err)
	}

	// Conversion: stored as v1, read and written as v2.
	v2, err := e.widgetV2.Namespace(e.ns).Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(v2.Object, "spec", "replicas"); n != 2 || v2.GetAPIVersion() != e.group+"/v2" {
		t.Errorf("v2 read: %s spec %v, want spec.replicas 2", v2.GetAPIVersion(), v2.Object["spec"])
	}
	if err := unstructured.SetNestedField(v2.Object, int64(5), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.widgetV2.Namespace(e.ns).Update(ctx, v2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1, err := widgets.Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(v1.Object, "spec", "size"); n != 5 {
		t.Errorf("v1 read after a v2 update: spec %v, want spec.size 5", v1.Object["spec"])
	}

	// At rest: events on every target make both replicas re-check, and
	// nothing is written.
	waitCertQueueIdle(t)
	before := r1.Writes.Total() + r2.Writes.Total()
	adds := certQueueMetric(t, "workqueue_adds_total")
	for i := range 3 {
		vwc, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		metav1.SetMetaDataLabel(&vwc.ObjectMeta, "touched", string(rune('a'+i)))
		if _, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 30*time.Second, "both replicas to re-check after the touches", func(context.Context) (bool, error) {
		return certQueueMetric(t, "workqueue_adds_total") >= adds+2, nil
	})
	waitCertQueueIdle(t)
	if after := r1.Writes.Total() + r2.Writes.Total(); after != before {
		t.Errorf("%d writes at rest:\n%s%s", after-before, r1.Writes.Summary(), r2.Writes.Summary())
	}
}

// certQueueMetric sums a workqueue metric of the certificate managers'
// queue ("webhook-certificates") over the managers in this process; for a
// histogram it is the sample count.
func certQueueMetric(t *testing.T, name string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "webhook-certificates" {
					switch {
					case m.GetCounter() != nil:
						sum += m.GetCounter().GetValue()
					case m.GetGauge() != nil:
						sum += m.GetGauge().GetValue()
					case m.GetHistogram() != nil:
						sum += float64(m.GetHistogram().GetSampleCount())
					}
				}
			}
		}
	}
	return sum
}

// waitCertQueueIdle waits until the certificate queues hold nothing and
// every item taken has been finished.
func waitCertQueueIdle(t *testing.T) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "the certificate queues to go idle", func(context.Context) (bool, error) {
		return certQueueMetric(t, "workqueue_depth") == 0 &&
			certQueueMetric(t, "workqueue_adds_total") == certQueueMetric(t, "workqueue_work_duration_seconds"), nil
	})
}

// Whoever blanks or edits a caBundle, the manager puts it back.
func TestBlankedCABundleIsRestored(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.startReplica(cp.Config, longCA, longCert)
	e.lb.Set(r.addr)
	e.waitReady(r)
	e.waitBundlesMatchSecret()

	admission := cp.Client.AdmissionregistrationV1()
	vwc, err := admission.ValidatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vwc.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := admission.ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mwc, err := admission.MutatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := certutil.GenerateSelfSignedCertKey("elsewhere", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mwc.Webhooks[0].ClientConfig.CABundle = other
	if _, err := admission.MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	crds := e.crds.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, e.crdName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.waitBundlesMatchSecret()
	e.waitAdmissionWorks()
	if _, err := e.widgetV2.Namespace(e.ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("reading through the restored conversion webhook: %v", err)
	}
}

// With every replica down, a create fails with the API server's webhook
// error and writes nothing; once a replica is back, the same create
// succeeds, served with the certificate kept in the Secret.
func TestWebhookDownFailsCleanlyAndRecovers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	r := e.startReplica(cp.Config, longCA, longCert)
	e.lb.Set(r.addr)
	e.waitReady(r)
	e.waitBundlesMatchSecret()
	e.waitAdmissionWorks()
	before, err := e.secret(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	e.lb.Set()
	widgets := e.widgets.Namespace(e.ns)
	_, err = widgets.Create(ctx, e.widget("while-down", 1), metav1.CreateOptions{})
	if err == nil {
		t.Fatal("create succeeded with no webhook replica")
	}
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "mutate.`+e.group+`"`) {
		t.Errorf("create with the webhook down: got %v, want the API server's internal error naming the webhook", err)
	}
	t.Logf("with the webhook down the create fails with: %v", err)
	if _, err := widgets.Get(ctx, "while-down", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused Widget was written: %v", err)
	}

	back := e.startReplica(cp.Config, longCA, longCert)
	e.lb.Set(back.addr)
	e.waitReady(back)
	framework.Eventually(t, 60*time.Second, "the same create to succeed with a replica back", func(ctx context.Context) (bool, error) {
		_, err := widgets.Create(ctx, e.widget("while-down", 1), metav1.CreateOptions{})
		return err == nil, err
	})
	after, err := e.secret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(after[certs.TLSCertKey]) != string(before[certs.TLSCertKey]) || string(after[certs.CABundleKey]) != string(before[certs.CABundleKey]) {
		t.Error("the restarted replica re-issued certificates that were still valid")
	}
}

// The HTTPS server of probes and metrics serves the managed certificate,
// which names the metrics Service, and the CA bundle is published in a
// ConfigMap: a scraper verifies the manager without skipping verification.
func TestMetricsServerVerifiesWithThePublishedBundle(t *testing.T) {
	e := newEnv(t)
	r := e.startReplicaWith(cp.Config, longCA, longCert, func(o *options.Options) {
		o.Generic.SecureServing = true
		o.Webhook.CAConfigMapName = "published-ca"
	})
	e.waitReady(r)
	var bundle []byte
	framework.Eventually(t, 30*time.Second, "the CA bundle ConfigMap", func(ctx context.Context) (bool, error) {
		cm, err := cp.Client.CoreV1().ConfigMaps(e.ns).Get(ctx, "published-ca", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		bundle = []byte(cm.Data[certs.CABundleKey])
		data, err := e.secret(ctx)
		return err == nil && string(bundle) == string(data[certs.CABundleKey]), err
	})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("the published bundle holds no certificate")
	}
	metricsHost := "controller-manager-metrics." + e.ns + ".svc"
	framework.Eventually(t, 30*time.Second, "/readyz over HTTPS verified as "+metricsHost, func(ctx context.Context) (bool, error) {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: metricsHost}}}
		res, err := client.Get(r.URL + "/readyz")
		if err != nil {
			return false, err
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, nil
	})
}
