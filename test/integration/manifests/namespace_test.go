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

package manifests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// userNamespace is where the composition test installs: not the default.
const userNamespace = "platform"

// composition is a user's kustomization over manifests/default, written
// the conventional way (namespace:, the base, components:, images:) and
// nothing else.
type composition struct {
	namespace  string   // none: the base's ndsl-system
	components []string // under manifests/components
	image      string   // an images: entry for controller-manager, if set
}

func (c composition) String() string {
	s := "namespace=" + c.namespace + " components=" + strings.Join(c.components, ",")
	if c.image != "" {
		s += " image=" + c.image
	}
	return s
}

// allComponents lists manifests/components.
func allComponents(t *testing.T) []string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(root, "manifests", "components", "*", "kustomization.yaml"))
	if err != nil || len(dirs) < 5 {
		t.Fatalf("manifests/components: %d components (%v), want cert-manager, cleanup, grafana, prometheus and alerts", len(dirs), err)
	}
	var names []string
	for _, d := range dirs {
		names = append(names, filepath.Base(filepath.Dir(d)))
	}
	return names
}

// compose builds, with kubectl's kustomize, the conventional kustomization
// with the given components (all of them when none is given), setting
// namespace unless it is empty, and returns what it builds to.
func compose(t *testing.T, namespace string, only ...string) (string, []map[string]any) {
	t.Helper()
	if len(only) == 0 {
		only = allComponents(t)
	}
	return composeWith(t, framework.Kustomizers(t)[0], composition{namespace: namespace, components: only})
}

// composeWith writes c into a directory of its own and builds it with k.
func composeWith(t *testing.T, k framework.Kustomizer, c composition) (string, []map[string]any) {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel := func(path string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, "manifests", path))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var kz strings.Builder
	kz.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	if c.namespace != "" {
		fmt.Fprintf(&kz, "namespace: %s\n", c.namespace)
	}
	fmt.Fprintf(&kz, "resources:\n  - %s\n", rel("default"))
	if len(c.components) > 0 {
		kz.WriteString("components:\n")
		for _, name := range c.components {
			fmt.Fprintf(&kz, "  - %s\n", rel(filepath.Join("components", name)))
		}
	}
	if c.image != "" {
		name, tag, _ := strings.Cut(c.image, ":")
		fmt.Fprintf(&kz, "images:\n  - name: controller-manager\n    newName: %s\n    newTag: %s\n", name, tag)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kz.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := k.Build(t, dir)
	var docs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	return string(out), docs
}

// namespaceToken finds a namespace written inside a value: the namespace
// segment of a DNS name (svc.NS.svc), of a namespace/name reference, or a
// whole value.
func namespaceToken(ns string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[./])` + regexp.QuoteMeta(ns) + `($|[./])`)
}

// strings calls f with the path and value of every string in v.
func walkStrings(path string, v any, f func(path, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			walkStrings(path+"."+k, e, f)
		}
	case []any:
		for i, e := range v {
			walkStrings(fmt.Sprintf("%s[%d]", path, i), e, f)
		}
	case string:
		f(path, v)
	}
}

// Issue 23, item 2: default plus every component, with the user's
// `namespace: platform`, names no other namespace anywhere, each value
// derived from the namespace is the user's, and the whole applies to the
// API server.
func TestComponentsComposeIntoTheUsersNamespace(t *testing.T) {
	out, docs := compose(t, userNamespace)
	checkNoOtherNamespace(t, out, docs, userNamespace)
	checkNamespaceDerived(t, docs, userNamespace)
	checkServiceMonitor(t, docs)
	applyDryRun(t, out, docs)
}

// Issue 37, part 1: every documented composition, written the
// conventional way (namespace:, the base, components:, images:, and no
// other line), moves everything to its namespace with the oldest and the
// newest kustomize users have, and with kubectl's.
func TestConventionalKustomizationOnEveryKustomize(t *testing.T) {
	all := allComponents(t)
	var compositions []composition
	for _, ns := range []string{"", userNamespace} {
		compositions = append(compositions, composition{namespace: ns}, composition{namespace: ns, components: all})
		for _, c := range all {
			compositions = append(compositions, composition{namespace: ns, components: []string{c}})
		}
	}
	compositions = append(compositions, composition{namespace: userNamespace, components: all, image: "registry.example.com/controller-manager:v9.9.9"})
	for _, k := range framework.Kustomizers(t) {
		t.Run(k.Name, func(t *testing.T) {
			for _, c := range compositions {
				out, docs := composeWith(t, k, c)
				ns := c.namespace
				if ns == "" {
					ns = "ndsl-system"
				}
				// t.Run per composition would print 40 names; the
				// composition heads each failure instead.
				ct := &prefixed{T: t, prefix: c.String() + ": "}
				checkNoOtherNamespace(ct, out, docs, ns)
				checkNamespaceDerived(ct, docs, ns)
				if c.image != "" && !strings.Contains(out, "image: "+c.image+"\n") {
					ct.Errorf("images: does not set the manager's image to %s", c.image)
				}
			}
		})
	}
}

// prefixed heads every error of T with prefix.
type prefixed struct {
	*testing.T
	prefix string
}

func (p *prefixed) Errorf(format string, args ...any) {
	p.T.Helper()
	p.T.Errorf(p.prefix+format, args...)
}

// testingT is what the checks need of a test.
type testingT interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

// checkNoOtherNamespace: unless ns is ndsl-system, no value names it; and
// no value names the placeholder "system" the bases carry.
func checkNoOtherNamespace(t testingT, out string, docs []map[string]any, ns string) {
	t.Helper()
	if ns != "ndsl-system" {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "ndsl-system") {
				t.Errorf("ndsl-system remains: %s", strings.TrimSpace(line))
			}
		}
	}
	placeholder := namespaceToken("system")
	for _, doc := range docs {
		walkStrings(fmt.Sprint(doc["kind"], " ", doc["metadata"].(map[string]any)["name"]), doc, func(path, s string) {
			if placeholder.MatchString(s) {
				t.Errorf("%s = %q names the namespace placeholder", path, s)
			}
		})
	}
}

// The ServiceMonitor verifies the metrics Service's certificate with the CA
// that issued it, the manager's or cert-manager's, whatever the order the
// components are listed in.
func TestServiceMonitorVerifiesWithTheIssuersCA(t *testing.T) {
	for _, components := range [][]string{{"prometheus"}, {"prometheus", "cert-manager"}, {"cert-manager", "prometheus"}} {
		_, docs := compose(t, userNamespace, components...)
		checkServiceMonitor(t, docs)
	}
}

// Without a namespace of the user's, the components land beside the
// manager in ndsl-system, with every derived value following.
func TestComponentsComposeIntoTheDefaultNamespace(t *testing.T) {
	_, docs := compose(t, "")
	checkNamespaceDerived(t, docs, "ndsl-system")
}

// checkNamespaceDerived: every namespaced object is in ns, and every value
// that names the manager's namespace names ns.
func checkNamespaceDerived(t testingT, docs []map[string]any, ns string) {
	t.Helper()
	injected, certificates := 0, 0
	for _, doc := range docs {
		var meta metav1.PartialObjectMetadata
		convert(t, doc, &meta)
		what := meta.Kind + " " + meta.Name
		clusterScoped := slices.Contains([]string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
			"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}, meta.Kind)
		if !clusterScoped && meta.Namespace != ns {
			t.Errorf("%s is in namespace %q, want %s", what, meta.Namespace, ns)
		}
		if meta.Kind == "Namespace" && meta.Name != ns {
			t.Errorf("the install creates Namespace %s, want %s", meta.Name, ns)
		}
		if ref, ok := meta.Annotations["cert-manager.io/inject-ca-from"]; ok {
			injected++
			if want := ns + "/controller-manager-webhook"; ref != want {
				t.Errorf("%s: inject-ca-from %q, want %q", what, ref, want)
			}
		}
		var services []*admissionregistrationv1.ServiceReference
		var selectors []*metav1.LabelSelector
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			convert(t, doc, &c)
			for _, h := range c.Webhooks {
				services, selectors = append(services, h.ClientConfig.Service), append(selectors, h.NamespaceSelector)
			}
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			convert(t, doc, &c)
			for _, h := range c.Webhooks {
				services, selectors = append(services, h.ClientConfig.Service), append(selectors, h.NamespaceSelector)
			}
		case "CustomResourceDefinition":
			var crd apiextensionsv1.CustomResourceDefinition
			convert(t, doc, &crd)
			if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil && c.Webhook.ClientConfig.Service != nil {
				services = append(services, &admissionregistrationv1.ServiceReference{Namespace: c.Webhook.ClientConfig.Service.Namespace})
			}
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.ClusterRoleBinding
			convert(t, doc, &b)
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Namespace != ns {
					t.Errorf("%s: subject ServiceAccount %s/%s, want namespace %s", what, s.Namespace, s.Name, ns)
				}
			}
		case "Certificate":
			var c struct {
				Spec struct {
					DNSNames []string `json:"dnsNames"`
				} `json:"spec"`
			}
			convert(t, doc, &c)
			certificates++
			if !slices.Contains(c.Spec.DNSNames, "controller-manager-webhook."+ns+".svc") {
				t.Errorf("%s: dnsNames %v, want controller-manager-webhook.%s.svc", what, c.Spec.DNSNames, ns)
			}
			for _, name := range c.Spec.DNSNames {
				if parts := strings.Split(name, "."); len(parts) > 1 && (len(parts) < 3 || parts[1] != ns) {
					t.Errorf("%s: dnsName %s, want one in namespace %s", what, name, ns)
				}
			}
		case "ServiceMonitor":
			var m struct {
				Spec struct {
					Endpoints []struct {
						TLSConfig struct {
							ServerName string `json:"serverName"`
						} `json:"tlsConfig"`
					} `json:"endpoints"`
				} `json:"spec"`
			}
			convert(t, doc, &m)
			for _, e := range m.Spec.Endpoints {
				// The bare Service name, which the manager's certificate and
				// cert-manager's both carry, holds in every namespace.
				if want := "controller-manager-metrics"; e.TLSConfig.ServerName != want {
					t.Errorf("%s: tlsConfig.serverName %q, want %q", what, e.TLSConfig.ServerName, want)
				}
			}
		}
		for _, s := range services {
			if s == nil || s.Namespace != ns {
				t.Errorf("%s: a webhook reaches Service %+v, want one in %s", what, s, ns)
			}
		}
		for _, s := range selectors {
			if !excludesNamespace(s, ns) {
				t.Errorf("%s: namespaceSelector %v does not leave the manager's namespace %s out", what, s, ns)
			}
		}
	}
	// With cert-manager: two CRDs and two webhook configurations.
	if want := 4 * certificates; injected != want {
		t.Errorf("%d objects carry cert-manager.io/inject-ca-from, want %d", injected, want)
	}
}

// checkServiceMonitor: a default kube-prometheus-stack selects the
// ServiceMonitor, which scrapes with a token from a Secret of its own
// namespace (no bearerTokenFile) of a ServiceAccount that may get /metrics.
func checkServiceMonitor(t *testing.T, docs []map[string]any) {
	t.Helper()
	type endpoint struct {
		BearerTokenFile string `json:"bearerTokenFile"`
		TLSConfig       struct {
			CA struct {
				ConfigMap *corev1.ConfigMapKeySelector `json:"configMap"`
				Secret    *corev1.SecretKeySelector    `json:"secret"`
			} `json:"ca"`
		} `json:"tlsConfig"`
		Authorization *struct {
			Type        string                   `json:"type"`
			Credentials corev1.SecretKeySelector `json:"credentials"`
		} `json:"authorization"`
	}
	var monitor *struct {
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			JobLabel  string     `json:"jobLabel"`
			Endpoints []endpoint `json:"endpoints"`
		} `json:"spec"`
	}
	secrets := map[string]corev1.Secret{}
	certificateSecret := ""    // cert-manager's Secret, with the cert-manager component
	bound := map[string]bool{} // ServiceAccounts bound to the metrics-reader ClusterRole
	for _, doc := range docs {
		switch doc["kind"] {
		case "ServiceMonitor":
			convert(t, doc, &monitor)
		case "Certificate":
			var c struct {
				Spec struct {
					SecretName string `json:"secretName"`
				} `json:"spec"`
			}
			convert(t, doc, &c)
			certificateSecret = c.Spec.SecretName
		case "Secret":
			var s corev1.Secret
			convert(t, doc, &s)
			secrets[s.Name] = s
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			convert(t, doc, &b)
			if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "ndsl-controller-manager:metrics-reader" {
				for _, s := range b.Subjects {
					if s.Kind == rbacv1.ServiceAccountKind {
						bound[s.Namespace+"/"+s.Name] = true
					}
				}
			}
		}
	}
	if monitor == nil {
		t.Fatal("no ServiceMonitor")
	}
	if monitor.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v: want release: kube-prometheus-stack, what a default kube-prometheus-stack selects", monitor.Labels)
	}
	if monitor.Spec.JobLabel != "app.kubernetes.io/name" {
		t.Errorf("ServiceMonitor jobLabel %q, want app.kubernetes.io/name (the alert rules select job=\"ndsl-controller-manager\")", monitor.Spec.JobLabel)
	}
	for _, e := range monitor.Spec.Endpoints {
		// The CA of whoever issues the certificate the metrics are served
		// with: the manager publishes its bundle in a ConfigMap; with
		// cert-manager, it is ca.crt of the Certificate's Secret.
		ca := e.TLSConfig.CA
		switch {
		case certificateSecret == "" && (ca.Secret != nil || ca.ConfigMap == nil ||
			ca.ConfigMap.Name != "controller-manager-ca" || ca.ConfigMap.Key != "ca-bundle.crt"):
			t.Errorf("ServiceMonitor tlsConfig.ca %+v, want the manager's ConfigMap controller-manager-ca, key ca-bundle.crt", ca)
		case certificateSecret != "" && (ca.ConfigMap != nil || ca.Secret == nil ||
			ca.Secret.Name != certificateSecret || ca.Secret.Key != "ca.crt"):
			t.Errorf("ServiceMonitor tlsConfig.ca %+v, want cert-manager's Secret %s, key ca.crt", ca, certificateSecret)
		}
		if e.BearerTokenFile != "" {
			t.Errorf("ServiceMonitor endpoint uses the deprecated bearerTokenFile %s", e.BearerTokenFile)
		}
		if e.Authorization == nil {
			t.Error("ServiceMonitor endpoint without authorization: /metrics answers 401")
			continue
		}
		secret, ok := secrets[e.Authorization.Credentials.Name]
		if !ok || secret.Namespace != monitor.Namespace || secret.Type != corev1.SecretTypeServiceAccountToken ||
			e.Authorization.Credentials.Key != corev1.ServiceAccountTokenKey {
			t.Errorf("ServiceMonitor credentials %+v: want key token of a service-account-token Secret installed beside it", e.Authorization.Credentials)
			continue
		}
		if sa := secret.Namespace + "/" + secret.Annotations[corev1.ServiceAccountNameKey]; !bound[sa] {
			t.Errorf("the scrape token's ServiceAccount %s is not bound to ndsl-controller-manager:metrics-reader (bound: %v)", sa, bound)
		}
	}
}

// applyDryRun sends the composition to the API server: the third-party
// CRDs (stand-ins) and the Namespace for real, everything else as a
// server-side dry run with strict field validation, so every object is
// admitted and validated against the real schemas of the built-in kinds
// and of the manager's CRDs, without the fail-closed webhooks taking
// effect for the other tests of this package.
func applyDryRun(t *testing.T, rendered string, docs []map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", cp.KubeconfigPath}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	ext, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	stubs, err := os.ReadFile(filepath.Join("testdata", "third-party-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range strings.Split(string(stubs), "\n---\n") {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			names = append(names, crd.Name)
			t.Cleanup(func() {
				_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
			})
		}
	}
	run(string(stubs), "apply", "--server-side", "-f", "-")
	if err := controlplane.WaitForCRDs(ctx, ext, time.Minute, names...); err != nil {
		t.Fatal(err)
	}

	for _, doc := range docs {
		if doc["kind"] == "Namespace" {
			data, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), userNamespace, metav1.DeleteOptions{})
			})
			run(string(data), "apply", "--server-side", "-f", "-")
		}
	}
	run(rendered, "apply", "--server-side", "--dry-run=server", "--validate=strict", "--field-manager=composition-test", "-f", "-")
}
