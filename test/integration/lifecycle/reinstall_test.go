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

package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	helmVersion = "v4.2.4"
	timeout     = 90 * time.Second
	webhookSvc  = "controller-manager-webhook"
)

// kind is one of the chart's CRDs and a sample object of it per version.
type kind struct {
	crd     string
	group   string
	plural  string
	samples map[string]string // version -> file under manifests/samples
	// clusterScoped: Pipelines are; the namespace is then ignored.
	clusterScoped bool
}

var kinds = []kind{
	{"apps.ingress.example.com", "ingress.example.com", "apps", map[string]string{"v1beta1": "app.yaml", "v1": "app.yaml"}, false},
	{"pipelines.distri-infer.ndsl.cn", "distri-infer.ndsl.cn", "pipelines", map[string]string{"v1beta1": "pipeline-v1beta1.yaml", "v1": "pipeline-v1.yaml"}, true},
}

// Issue 37, part 3: helm uninstall (CRDs kept) leaves every kept App and
// Pipeline readable at every served version and their namespace deletable;
// a reinstall under another release name into another namespace takes the
// CRDs over (conversion to its Service, its caBundle) with no manual step.
func TestUninstallThenReinstallElsewhere(t *testing.T) {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	stopRunner := framework.RunHookJobs(t, cp)
	defer stopRunner()

	// 1. Install as "one" into one-system; create objects at both versions.
	m := install(t, "one", "one-system")
	tenant := createNamespace(t, "tenant-one")
	created := createAtEveryVersion(t, dyn, tenant, "a")

	// 2. Uninstall: the manager's pods and Service go.
	if out, err := helm(t, "uninstall", "one", "--namespace", "one-system", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		crd := getCRD(t, k.crd)
		if owner := crd.Annotations[certs.CABundleOwnerAnnotation]; owner != "" {
			t.Errorf("after helm uninstall CRD %s still says %s=%s", k.crd, certs.CABundleOwnerAnnotation, owner)
		}
	}
	readAtEveryServedVersion(t, dyn, tenant, created, "after helm uninstall")
	deleteNamespace(t, tenant, "after helm uninstall")

	// 3. Reinstall as "two" into two-system.
	install(t, "two", "two-system")
	for _, k := range kinds {
		crd := getCRD(t, k.crd)
		conv := crd.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook.ClientConfig.Service == nil ||
			conv.Webhook.ClientConfig.Service.Namespace != "two-system" {
			t.Errorf("after the reinstall CRD %s converts through %+v, want the Service in two-system", k.crd, conv)
		}
		if owner := crd.Annotations[certs.CABundleOwnerAnnotation]; !strings.HasPrefix(owner, "two-system/") {
			t.Errorf("after the reinstall CRD %s: %s=%q, want two-system's", k.crd, certs.CABundleOwnerAnnotation, owner)
		}
	}
	tenant2 := createNamespace(t, "tenant-two")
	created2 := createAtEveryVersion(t, dyn, tenant2, "b")
	readAtEveryServedVersion(t, dyn, tenant2, created2, "after the reinstall")
}

// install installs the chart as release into namespace, runs the manager
// (webhooks and certificates only) as that release's pods would, routes the
// release's webhook Service to it and waits until conversion works.
func install(t *testing.T, release, namespace string) *framework.Manager {
	t.Helper()
	if out, err := helm(t, "install", release, chartDir(t), "--namespace", namespace, "--create-namespace", "--timeout", "2m"); err != nil {
		t.Fatalf("helm install %s into %s: %v\n%s", release, namespace, err, out)
	}
	ip := hostIP(t)
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{}
		o.Webhook.Enabled = true
		o.Webhook.Address = ip
		o.Webhook.Port = 0
		o.Webhook.Namespace = namespace
	})
	port := m.WebhookAddr().(*net.TCPAddr).Port
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: webhookSvc + "-test", Namespace: namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: webhookSvc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("webhook"), Port: ptr.To(int32(port))}},
	}
	if _, err := cp.Client.DiscoveryV1().EndpointSlices(namespace).Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Conversion and admission work once the manager has written the
	// caBundles and the API server has seen the EndpointSlice and the CRDs.
	ns := createNamespace(t, "probe-"+release)
	framework.Eventually(t, timeout, "conversion through "+namespace+"'s Service", func(ctx context.Context) (bool, error) {
		dyn, err := dynamic.NewForConfig(cp.Config)
		if err != nil {
			return false, err
		}
		for _, k := range kinds {
			obj := sample(t, k, "v1")
			obj.SetName("probe-" + release)
			if _, err := resource(dyn, k, "v1", ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Logf("probe %s: %v", k.plural, err)
				return false, err
			}
			if _, err := resource(dyn, k, "v1", ns).Get(ctx, "probe-"+release, metav1.GetOptions{}); err != nil {
				return false, err
			}
			// Through v1beta1 too: the API server's App defaulting policy
			// refuses it ("Resource kind ... not found") until it has read
			// the new CRD's schema, up to 5 s after the CRD is served.
			beta := sample(t, k, "v1beta1")
			beta.SetName("probe-" + release)
			if _, err := resource(dyn, k, "v1beta1", ns).Create(ctx, beta, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Logf("probe %s at v1beta1: %v", k.plural, err)
				return false, nil
			}
		}
		return true, nil
	})
	return m
}

// created names an object by its kind and the version it was created at.
type created struct {
	kind kind
	name string
}

func createAtEveryVersion(t *testing.T, dyn dynamic.Interface, ns, prefix string) []created {
	t.Helper()
	var out []created
	for _, k := range kinds {
		for _, v := range []string{"v1beta1", "v1"} {
			obj := sample(t, k, v)
			obj.SetName(prefix + "-" + v)
			if _, err := resource(dyn, k, v, ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s %s at %s: %v", k.plural, obj.GetName(), v, err)
			}
			out = append(out, created{k, obj.GetName()})
		}
	}
	return out
}

// readAtEveryServedVersion gets and lists every object at every version
// its CRD serves now.
func readAtEveryServedVersion(t *testing.T, dyn dynamic.Interface, ns string, objs []created, when string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		for _, v := range getCRD(t, o.kind.crd).Spec.Versions {
			if !v.Served {
				continue
			}
			if _, err := resource(dyn, o.kind, v.Name, ns).Get(ctx, o.name, metav1.GetOptions{}); err != nil {
				t.Errorf("%s: get %s %s at %s: %v", when, o.kind.plural, o.name, v.Name, err)
			}
			if _, err := resource(dyn, o.kind, v.Name, ns).List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("%s: list %s at %s: %v", when, o.kind.plural, v.Name, err)
			}
		}
	}
}

func deleteNamespace(t *testing.T, ns, when string) {
	t.Helper()
	if err := cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := 60 * time.Second
	err := pollUntil(deadline, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		got, _ := cp.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		var conds []string
		if got != nil {
			for _, c := range got.Status.Conditions {
				if c.Status == "True" {
					conds = append(conds, fmt.Sprintf("%s: %s", c.Type, c.Message))
				}
			}
		}
		t.Errorf("%s: namespace %s not deleted within %s: %s", when, ns, deadline, strings.Join(conds, "; "))
	}
}

func pollUntil(d time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		if ok, err := cond(ctx); err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := cp.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func getCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func resource(dyn dynamic.Interface, k kind, version, ns string) dynamic.ResourceInterface {
	if k.clusterScoped {
		return dyn.Resource(gvr(k, version))
	}
	return dyn.Resource(gvr(k, version)).Namespace(ns)
}

func gvr(k kind, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: k.group, Version: version, Resource: k.plural}
}

// sample is the manifests/samples object of k at version.
func sample(t *testing.T, k kind, version string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "samples", k.samples[version]))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetAPIVersion(k.group + "/" + version)
	return obj
}

// hostIP is an address of this machine the API server may be routed to:
// Endpoints and EndpointSlices refuse loopback addresses.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address to route the webhook Service to")
	return ""
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t *testing.T) string { return filepath.Join(repoRoot(t), "charts", "controller-manager") }

// helm runs the helm of hack/build-helm.sh against the control plane, with
// a private configuration and cache.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir := os.Getenv(controlplane.BinDirEnv)
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "hack", "bin")
	}
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(dir, "helm-"+helmVersion, "helm"), append(args, "--kubeconfig", cp.KubeconfigPath)...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
