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
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Long lifetimes: nothing is due for renewal during these tests, so every
// Secret write is one the names caused.
const (
	quietCA   = 24 * time.Hour
	quietCert = 12 * time.Hour
)

// Two replicas whose names differ (a rolling upgrade changing
// --webhook-cert-extra-names) converge on one certificate covering both, and
// then leave the Secret alone.
func TestReplicasWithDifferentNamesConvergeOnOneCertificate(t *testing.T) {
	e := newEnv(t)
	const extra = "replica-two.example"
	r1 := e.startReplica(cp.Config, quietCA, quietCert)
	r2 := e.startReplicaWith(cp.Config, quietCA, quietCert, func(o *options.Options) {
		o.Webhook.ExtraNames = []string{"127.0.0.1", extra}
	})
	e.waitReady(r1, r2)
	framework.Eventually(t, 60*time.Second, "one certificate covering both replicas' names", func(ctx context.Context) (bool, error) {
		data, err := e.secret(ctx)
		if err != nil {
			return false, err
		}
		return coversBoth(data, extra)
	})

	ctx := context.Background()
	s, err := cp.Client.CoreV1().Secrets(e.ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	window, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := cp.Client.CoreV1().Secrets(e.ns).Watch(window, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", secretName).String(),
		ResourceVersion: s.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := 0
	for ev := range w.ResultChan() {
		if ev.Type == watch.Modified || ev.Type == watch.Added || ev.Type == watch.Deleted {
			writes++
		}
	}
	if writes != 0 {
		t.Errorf("the Secret was written %d times in 10 s after the replicas converged, want 0 (r1 wrote %v, r2 wrote %v)",
			writes, r1.Writes.ByRequest(), r2.Writes.ByRequest())
	}
	data, err := e.secret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := coversBoth(data, extra); !ok {
		t.Errorf("the final certificate does not cover both replicas' names: %v", err)
	}
}

// coversBoth tells whether the Secret's serving certificate is valid for
// 127.0.0.1 (both replicas) and for extra (the second one).
func coversBoth(data map[string][]byte, extra string) (bool, error) {
	leafs, err := certutil.ParseCertsPEM(data[certs.TLSCertKey])
	if err != nil {
		return false, err
	}
	leaf := leafs[0]
	if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("127.0.0.1")) }) {
		return false, fmt.Errorf("no 127.0.0.1 in %v", leaf.IPAddresses)
	}
	if !slices.Contains(leaf.DNSNames, extra) {
		return false, fmt.Errorf("no %s in %v", extra, leaf.DNSNames)
	}
	return true, nil
}

// The caBundle is written by server-side apply of the caBundle alone: a
// label another field manager set stays, no request replaces a whole
// object (PUT), and the ownership marker names the install.
func TestCABundleIsAppliedKeepingOtherManagersFields(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admission := cp.Client.AdmissionregistrationV1()
	label := []byte(`{"metadata":{"labels":{"other-tool/owned":"yes"}}}`)
	other := metav1.PatchOptions{FieldManager: "other-tool"}
	if _, err := admission.ValidatingWebhookConfigurations().Patch(ctx, e.configName(), types.MergePatchType, label, other); err != nil {
		t.Fatal(err)
	}
	if _, err := admission.MutatingWebhookConfigurations().Patch(ctx, e.configName(), types.MergePatchType, label, other); err != nil {
		t.Fatal(err)
	}
	if _, err := e.crds.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, e.crdName(), types.MergePatchType, label, other); err != nil {
		t.Fatal(err)
	}
	r := e.startReplica(cp.Config, quietCA, quietCert)
	e.waitReady(r)
	e.waitBundlesMatchSecret()

	vwc, err := admission.ValidatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwc, err := admission.MutatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd, err := e.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, e.crdName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := e.ns + "/" + secretName
	for _, m := range []metav1.Object{vwc, mwc, crd} {
		if m.GetLabels()["other-tool/owned"] != "yes" {
			t.Errorf("%s lost the other tool's label: %v", m.GetName(), m.GetLabels())
		}
		if got := m.GetAnnotations()[certs.CABundleOwnerAnnotation]; got != owner {
			t.Errorf("%s: annotation %s = %q, want %q", m.GetName(), certs.CABundleOwnerAnnotation, got, owner)
		}
	}
	patches := 0
	for req, n := range r.Writes.ByRequest() {
		isTarget := strings.HasSuffix(req, "/"+e.configName()) || strings.HasSuffix(req, "/"+e.crdName())
		if !isTarget {
			continue
		}
		if !strings.HasPrefix(req, "PATCH ") {
			t.Errorf("%d× %s: the caBundle must be written by a patch, not by replacing the object", n, req)
		}
		patches += n
	}
	if patches < 3 {
		t.Errorf("%d caBundle patches, want at least one per target:\n%s", patches, r.Writes.Summary())
	}
}

// A second install (another namespace, its own Secret) configured with the
// same cluster-scoped targets does not take their caBundle over: it
// reports the conflict on its metric and leaves the first install's bundle.
func TestSecondInstallDoesNotTakeOverCABundle(t *testing.T) {
	e := newEnv(t)
	first := e.startReplica(cp.Config, quietCA, quietCert)
	e.waitReady(first)
	e.waitBundlesMatchSecret()

	otherNS := framework.CreateNamespace(t, cp.Client)
	second := e.startReplicaWith(cp.Config, quietCA, quietCert, func(o *options.Options) { o.Webhook.Namespace = otherNS })
	e.waitReady(second)
	framework.Eventually(t, 60*time.Second, "the second install to report the caBundle conflict", func(context.Context) (bool, error) {
		_, body, err := second.Get("/metrics")
		if err != nil {
			return false, err
		}
		if v, ok := metricValue(body, "controller_manager_webhook_cabundle_conflict", `name="`+e.configName()+`"`); !ok || v != 1 {
			return false, fmt.Errorf("controller_manager_webhook_cabundle_conflict for %s is %v (present %v)", e.configName(), v, ok)
		}
		return true, nil
	})
	framework.Eventually(t, 30*time.Second, "a Warning Event on the second install's Secret", func(ctx context.Context) (bool, error) {
		events, err := cp.Client.CoreV1().Events(otherNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Type == "Warning" && ev.Reason == "CABundleOwnedElsewhere" && ev.InvolvedObject.Name == secretName &&
				strings.Contains(ev.Message, e.ns+"/"+secretName) {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none a CABundleOwnedElsewhere warning naming %s/%s", len(events.Items), e.ns, secretName)
	})
	data, err := e.secret(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bundles, err := e.bundles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range bundles {
		if string(b) != string(data[certs.CABundleKey]) {
			t.Errorf("the %s caBundle is no longer the first install's", name)
		}
	}
	for req, n := range second.Writes.ByRequest() {
		if strings.HasSuffix(req, "/"+e.configName()) || strings.HasSuffix(req, "/"+e.crdName()) {
			t.Errorf("the second install wrote %d× %s", n, req)
		}
	}
}

// The expiry metric carries the NotAfter of the Secret's serving
// certificate and CA.
func TestCertificateExpiryMetric(t *testing.T) {
	e := newEnv(t)
	r := e.startReplica(cp.Config, quietCA, quietCert)
	e.waitReady(r)
	data, err := e.secret(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for kind, key := range map[string]string{"serving": certs.TLSCertKey, "ca": certs.CACertKey} {
		parsed, err := certutil.ParseCertsPEM(data[key])
		if err != nil {
			t.Fatal(err)
		}
		want[kind] = parsed[0].NotAfter.Unix()
	}
	framework.Eventually(t, 30*time.Second, "the expiry metric to show the Secret's certificates", func(context.Context) (bool, error) {
		_, body, err := r.Get("/metrics")
		if err != nil {
			return false, err
		}
		for kind, at := range want {
			v, ok := metricValue(body, "controller_manager_webhook_certificate_expiry_timestamp_seconds", `kind="`+kind+`"`)
			if !ok || int64(v) != at {
				return false, fmt.Errorf("expiry of %s is %v (present %v), want %d", kind, int64(v), ok, at)
			}
		}
		return true, nil
	})
}

// metricValue finds the sample of name whose labels include label in a
// Prometheus text exposition.
func metricValue(body, name, label string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		fieldsOf := strings.Fields(line)
		v, err := strconv.ParseFloat(fieldsOf[len(fieldsOf)-1], 64)
		return v, err == nil
	}
	return 0, false
}
