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

// Package tenancy runs two teams against one manager in one cluster (issue
// 35): each team is a user bound to the shipped roles, with edit in its own
// namespace and in the shared default Pipeline namespace, and every case
// is one team attacking the other through the manager. The manager runs
// with its own webhook server, registered as manifests/default registers
// it (pointed at 127.0.0.1), against a real kube-apiserver with RBAC,
// kube-controller-manager (garbage collector, PV binder, endpoints),
// kube-scheduler and kwok. Each case asserts behaviour: the attempt is
// refused by the API, or it is made harmless once the manager has seen it.
package tenancy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/testing/webhookurl"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	// managerNamespace is the manifests' install namespace: the webhook
	// certificate Secret lives there, and no team has rights in it.
	managerNamespace = "ndsl-system"
	// sharedNamespace is the default Pipeline namespace, where both teams
	// have edit: most of the attacks happened there.
	sharedNamespace = "pipeline"
	// nfsServer and nfsExport are what the NFS allowlist allows.
	nfsServer = "192.0.2.10"
	nfsExport = "/exports"
	// allowedImages is the image allowlist: Docker Hub's official images.
	allowedImages = "docker.io/library/"
	// stepImage passes the image allowlist.
	stepImage = "docker.io/library/nginx:1.27"
	// node is the kwok node the pods run on.
	node = "tenancy-node"
)

var (
	cp *controlplane.ControlPlane
	// manager is the suite's one manager, every controller and webhook on.
	manager *framework.Manager
	// setupErr is why the suite could not be set up; every test fails with it.
	setupErr error
)

// tenancyOptions is every option the suite runs the manager with, beyond
// the test plumbing (webhook address, no leader election): a shared cluster
// as an administrator would configure it, each allowlist set.
func tenancyOptions(o *options.Options) {
	o.Pipeline.AllowedNamespaces = []string{pipeline.AnyNamespace}
	o.Pipeline.AllowedNFS = []string{nfsServer + ":" + nfsExport}
	o.Pipeline.AllowedImages = []string{allowedImages}
	// The notes' inversion of enable_ingress would only confuse the App cases.
	o.AppAdmission.InvertEnableIngress = false
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	defer klog.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true})
	if err != nil {
		klog.ErrorS(err, "Starting the control plane for the tests")
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane")
		}
	}()
	setupErr = setupSuite(ctx)
	if setupErr != nil {
		klog.ErrorS(setupErr, "Setting up the suite")
	}
	defer func() {
		if manager != nil {
			_ = manager.Stop()
		}
	}()
	return m.Run()
}

// setupSuite installs manifests/default's CRDs, webhook configurations and
// roles with the webhooks pointed at a free loopback port, starts the
// manager serving them there, binds the two teams and waits until the API
// server calls the webhooks.
func setupSuite(ctx context.Context) error {
	if err := cp.CreateFakeNodes(ctx, node); err != nil {
		return err
	}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return err
	}
	for _, ns := range []string{managerNamespace, sharedNamespace} {
		_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	if err := installManifests(ctx, fmt.Sprintf("https://127.0.0.1:%d", ports[0])); err != nil {
		return err
	}
	// The manager outlives ctx, which bounds the setup only.
	manager, err = framework.RunManager(klog.NewContext(context.Background(), klog.Background()), cp.Config, app.NewRegistry(), func(o *options.Options) {
		o.Generic.ShutdownTimeout = 10 * time.Second
		o.Generic.ShutdownDelay = 0
		o.Webhook = options.DefaultWebhookOptions()
		o.Webhook.Address = "127.0.0.1"
		o.Webhook.Port = ports[0]
		o.Webhook.Namespace = managerNamespace
		o.Webhook.ExtraNames = []string{"127.0.0.1"}
		tenancyOptions(o)
	})
	if err != nil {
		return err
	}
	if err := setupTeams(ctx); err != nil {
		return err
	}
	return waitWebhooksCalled(ctx)
}

// installManifests applies the CRDs, the webhook configurations and the
// cluster roles of manifests/default, every webhook pointed at base; the
// manager fills in their caBundles as it does in a cluster.
func installManifests(ctx context.Context, base string) error {
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		return err
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, kubectl, "kustomize", filepath.Join(root, "manifests", "default")).Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize manifests/default: %w", err)
	}
	// The App admission policies too, but for the inversion's, which the
	// suite's --app-invert-enable-ingress=false leaves out (docs/apis.md),
	// and the Pipeline policy, holding the suite's allowlists as the
	// manager's flags do.
	keep := map[string]bool{"CustomResourceDefinition": true, "MutatingWebhookConfiguration": true,
		"ValidatingWebhookConfiguration": true, "ClusterRole": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}
	var selected bytes.Buffer
	var crds []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("decoding manifests/default: %w", err)
		}
		if !keep[obj.GetKind()] {
			continue
		}
		if obj.GetKind() == "ValidatingAdmissionPolicy" && obj.GetName() == "ndsl-pipeline-validation" {
			policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, policy); err != nil {
				return err
			}
			o := options.NewOptions()
			tenancyOptions(o)
			if err := framework.SetPipelinePolicyFlags(policy, o.Pipeline); err != nil {
				return err
			}
			if obj.Object, err = runtime.DefaultUnstructuredConverter.ToUnstructured(policy); err != nil {
				return err
			}
		}
		if _, err := webhookurl.Rewrite(obj, base); err != nil {
			return err
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, obj.GetName())
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		selected.WriteString("---\n")
		selected.Write(data)
	}
	path := filepath.Join(cp.Dir, "tenancy-manifests.yaml")
	if err := os.WriteFile(path, selected.Bytes(), 0o600); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig="+cp.KubeconfigPath, "apply", "--server-side", "-f", path).CombinedOutput(); err != nil {
		return fmt.Errorf("applying manifests/default's CRDs, webhooks and roles: %w: %s", err, out)
	}
	crdClient, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	return controlplane.WaitForCRDs(ctx, crdClient, time.Minute, crds...)
}

// waitWebhooksCalled waits until the API server calls the manager's
// Pipeline webhook with the caBundle the manager filled in, and enforces
// the App admission policies: a dry-run create only they refuse is refused
// with their message.
func waitWebhooksCalled(ctx context.Context) error {
	probe := newPipeline("tenancy-probe", "", nfsExport, step("m"))
	probe.Spec.Steps[0].Image = "quay.io/elsewhere/image:1"
	appProbe := newApp("probe", true)
	appProbe.Spec.Image = "Not A Reference"
	var last error
	err := pollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		_, last = admin.crd.PipelineV1beta1().Pipelines().Create(ctx, probe, dry)
		if last == nil || !strings.Contains(last.Error(), "is not allowed for Pipelines") {
			return false, nil
		}
		_, last = admin.crd.AppV1beta1().Apps("default").Create(ctx, appProbe, dry)
		return last != nil && strings.Contains(last.Error(), "not a valid image reference"), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server to call the manager's webhooks: %w (last answer: %v)", err, last)
	}
	return nil
}

// requireSuite fails the test when the suite could not be set up.
func requireSuite(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("setting up the suite: %v", setupErr)
	}
}
