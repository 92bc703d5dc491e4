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
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/pkg/testing/tcpbalancer"
	"github.com/ndsl/controller-manager/pkg/webhook"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The test webhooks' paths; the manager's own are registered too, on theirs.
const (
	pathMutate   = "/test/mutate"
	pathValidate = "/test/validate"
	pathConvert  = "/test/convert"
	secretName   = "webhook-certs"
	mutatedLabel = "webhook-test/mutated"
)

// env is one test's world: a namespace, a Widget CRD of its own group with
// a conversion webhook, webhook configurations matching Widgets in the
// namespace, and the balancer their URLs name.
type env struct {
	t        *testing.T
	ns       string
	group    string
	lb       *tcpbalancer.Balancer
	widgets  dynamic.NamespaceableResourceInterface // v1, the storage version
	widgetV2 dynamic.NamespaceableResourceInterface
	crds     apiextensionsclient.Interface
}

func newEnv(t *testing.T) *env {
	t.Helper()
	lb, err := tcpbalancer.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	e := &env{t: t, ns: framework.CreateNamespace(t, cp.Client), lb: lb}
	e.group = rand.String(8) + ".webhooktest.ndsl.cn"
	// The webhook configurations' URLs name the balancer, which stands in
	// for the Service in front of the replicas.
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	e.widgets = dyn.Resource(schema.GroupVersionResource{Group: e.group, Version: "v1", Resource: "widgets"})
	e.widgetV2 = dyn.Resource(schema.GroupVersionResource{Group: e.group, Version: "v2", Resource: "widgets"})
	if e.crds, err = apiextensionsclient.NewForConfig(cp.Config); err != nil {
		t.Fatal(err)
	}
	e.createCRD()
	e.createWebhookConfigurations()
	return e
}

func (e *env) url(path string) *string { return ptr.To("https://" + e.lb.Addr() + path) }

func (e *env) crdName() string { return "widgets." + e.group }

// configName names both webhook configurations.
func (e *env) configName() string { return e.group }

func (e *env) createCRD() {
	ctx := context.Background()
	schemaProps := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		},
	}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: e.crdName()},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: e.group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaProps},
				{Name: "v2", Served: true, Schema: schemaProps},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ConversionReviewVersions: []string{"v1"},
					// No caBundle: the manager puts it in.
					ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: e.url(pathConvert)},
				},
			},
		},
	}
	client := e.crds.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := client.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = client.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}) })
	framework.Eventually(e.t, 30*time.Second, "the Widget CRD to be established", func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// createWebhookConfigurations installs a mutating and a validating webhook
// for Widgets in the test's namespace, configured as the manifests configure
// the manager's: Fail, no side effects, short timeout, Equivalent matching.
func (e *env) createWebhookConfigurations() {
	ctx := context.Background()
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{e.group}, APIVersions: []string{"*"}, Resources: []string{"widgets"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	nsSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}}
	fail := ptr.To(admissionregistrationv1.Fail)
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	equivalent := ptr.To(admissionregistrationv1.Equivalent)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: e.configName()},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate." + e.group, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: e.url(pathMutate)},
			Rules: rules, FailurePolicy: fail, SideEffects: none, TimeoutSeconds: ptr.To[int32](5),
			MatchPolicy: equivalent, NamespaceSelector: nsSelector, AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: e.configName()},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate." + e.group, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: e.url(pathValidate)},
			Rules: rules, FailurePolicy: fail, SideEffects: none, TimeoutSeconds: ptr.To[int32](5),
			MatchPolicy: equivalent, NamespaceSelector: nsSelector, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	admission := cp.Client.AdmissionregistrationV1()
	if _, err := admission.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := admission.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = admission.MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
		_ = admission.ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
	})
}

// testWebhooks are served beside the manager's own: a mutation that labels
// a Widget (idempotently), a validation that rejects a negative spec.size,
// and a v1 spec.size <-> v2 spec.replicas conversion.
func testWebhooks() []app.WebhookRegistration {
	gk := schema.GroupKind{Kind: "Widget"}
	return []app.WebhookRegistration{
		{Path: pathMutate, Name: "test-mutate", Admission: func(app.WebhookContext) (webhook.AdmissionHandler, error) {
			return webhook.AdmissionFunc(func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				obj := &unstructured.Unstructured{}
				if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
					return webhook.Errored(http.StatusBadRequest, err)
				}
				if obj.GetLabels()[mutatedLabel] == "true" {
					return webhook.Allowed()
				}
				if obj.GetLabels() == nil {
					return webhook.Patched([]webhook.JSONPatchOp{{Op: "add", Path: "/metadata/labels", Value: map[string]string{mutatedLabel: "true"}}})
				}
				return webhook.Patched([]webhook.JSONPatchOp{{Op: "add", Path: "/metadata/labels/" + strings.ReplaceAll(mutatedLabel, "/", "~1"), Value: "true"}})
			}), nil
		}},
		{Path: pathValidate, Name: "test-validate", Admission: func(app.WebhookContext) (webhook.AdmissionHandler, error) {
			return webhook.AdmissionFunc(func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				obj := &unstructured.Unstructured{}
				if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
					return webhook.Errored(http.StatusBadRequest, err)
				}
				if size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size"); size < 0 {
					gk.Group = req.Kind.Group
					return webhook.Invalid(gk, obj.GetName(), field.ErrorList{field.Invalid(field.NewPath("spec", "size"), size, "must not be negative")})
				}
				return webhook.Allowed()
			}), nil
		}},
		{Path: pathConvert, Name: "test-convert", Conversion: func(app.WebhookContext) (webhook.Converter, error) {
			return webhook.ConverterFunc(func(_ context.Context, obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
				out := obj.DeepCopy()
				out.SetAPIVersion(to)
				from, into := "size", "replicas"
				if strings.HasSuffix(to, "/v1") {
					from, into = into, from
				}
				if v, found, _ := unstructured.NestedFieldCopy(obj.Object, "spec", from); found {
					unstructured.RemoveNestedField(out.Object, "spec", from)
					if err := unstructured.SetNestedField(out.Object, v, "spec", into); err != nil {
						return nil, err
					}
				}
				return out, nil
			}), nil
		}},
	}
}

// replica is one manager process's worth: a manager serving webhooks only.
type replica struct {
	*framework.Manager
	addr string
}

// startReplica runs a manager that serves webhooks only, on a free loopback
// port, issuing its certificates into the namespace's Secret for
// 127.0.0.1 (what the URLs name), with ca and cert validities.
func (e *env) startReplica(cfg *rest.Config, caValidity, certValidity time.Duration) *replica {
	e.t.Helper()
	return e.startReplicaWith(cfg, caValidity, certValidity, nil)
}

// startReplicaWith is startReplica with more options changed by mutate.
func (e *env) startReplicaWith(cfg *rest.Config, caValidity, certValidity time.Duration, mutate func(*options.Options)) *replica {
	e.t.Helper()
	m := framework.StartManager(e.t, cfg, func(o *options.Options) {
		o.Generic.Controllers = nil
		o.Webhook = options.DefaultWebhookOptions()
		o.Webhook.Address = "127.0.0.1"
		o.Webhook.Port = 0
		o.Webhook.Namespace = e.ns
		o.Webhook.SecretName = secretName
		o.Webhook.ExtraNames = []string{"127.0.0.1"}
		o.Webhook.ConfigurationName = e.configName()
		o.Webhook.ConversionCRDs = []string{e.crdName()}
		o.Webhook.CAValidity = caValidity
		o.Webhook.CertValidity = certValidity
		if mutate != nil {
			mutate(o)
		}
	}, app.WithExtraWebhooks(testWebhooks()...))
	return &replica{Manager: m, addr: m.WebhookAddr().String()}
}

// waitReady waits until every replica reports ready, which includes a
// loaded serving certificate.
func (e *env) waitReady(replicas ...*replica) {
	e.t.Helper()
	for _, r := range replicas {
		framework.Eventually(e.t, 60*time.Second, "/readyz of "+r.addr, func(context.Context) (bool, error) {
			status, body, err := r.Get("/readyz?verbose")
			if err != nil {
				return false, err
			}
			if status != http.StatusOK {
				return false, fmt.Errorf("%d: %s", status, body)
			}
			if !strings.Contains(body, "[+]webhook-certificate ok") {
				return false, fmt.Errorf("no webhook-certificate check in %q", body)
			}
			return true, nil
		})
	}
}

// secret reads the certificate Secret.
func (e *env) secret(ctx context.Context) (map[string][]byte, error) {
	s, err := cp.Client.CoreV1().Secrets(e.ns).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return s.Data, nil
}

// bundles returns the caBundle of the validating and mutating webhooks and
// of the CRD's conversion webhook.
func (e *env) bundles(ctx context.Context) (map[string][]byte, error) {
	admission := cp.Client.AdmissionregistrationV1()
	vwc, err := admission.ValidatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	mwc, err := admission.MutatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	crd, err := e.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, e.crdName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"validating": vwc.Webhooks[0].ClientConfig.CABundle,
		"mutating":   mwc.Webhooks[0].ClientConfig.CABundle,
		"conversion": crd.Spec.Conversion.Webhook.ClientConfig.CABundle,
	}, nil
}

// waitBundlesMatchSecret waits until every caBundle equals the Secret's bundle.
func (e *env) waitBundlesMatchSecret() {
	e.t.Helper()
	framework.Eventually(e.t, 60*time.Second, "every caBundle to equal the Secret's bundle", func(ctx context.Context) (bool, error) {
		data, err := e.secret(ctx)
		if err != nil {
			return false, err
		}
		bundles, err := e.bundles(ctx)
		if err != nil {
			return false, err
		}
		for name, b := range bundles {
			if string(b) != string(data[certs.CABundleKey]) {
				return false, fmt.Errorf("%s caBundle differs from the Secret's", name)
			}
		}
		return true, nil
	})
}

// widget returns a v1 Widget.
func (e *env) widget(name string, size int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": e.group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
		"spec":     map[string]any{"size": size},
	}}
}

// waitAdmissionWorks creates Widgets until one is admitted: the API server
// picks up new webhook configurations and caBundles asynchronously.
func (e *env) waitAdmissionWorks() {
	e.t.Helper()
	i := 0
	framework.Eventually(e.t, 60*time.Second, "a Widget create to pass the webhooks", func(ctx context.Context) (bool, error) {
		i++
		_, err := e.widgets.Namespace(e.ns).Create(ctx, e.widget(fmt.Sprintf("warmup-%d", i), 1), metav1.CreateOptions{})
		return err == nil, err
	})
}

// servedLeaf makes a fresh TLS connection to addr, as the API server does
// with a new caBundle, and returns the certificate served, verified against
// bundle for 127.0.0.1.
func servedLeaf(addr string, bundle []byte) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("caBundle holds no certificate")
	}
	dialer := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// blankBundles empties the caBundle of every webhook and of the CRD's
// conversion webhook.
func (e *env) blankBundles(ctx context.Context) {
	e.t.Helper()
	admission := cp.Client.AdmissionregistrationV1()
	vwc, err := admission.ValidatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = nil
	}
	if _, err := admission.ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	mwc, err := admission.MutatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = nil
	}
	if _, err := admission.MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	crds := e.crds.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, e.crdName(), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
