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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	appconversion "github.com/ndsl/controller-manager/apis/app/conversion"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// timeout bounds every wait.
const timeout = 90 * time.Second

var (
	appsV1beta1 = schema.GroupVersionResource{Group: "ingress.example.com", Version: "v1beta1", Resource: "apps"}
	appsV1      = schema.GroupVersionResource{Group: "ingress.example.com", Version: "v1", Resource: "apps"}
)

// webhookNames are the configurations this package creates.
const (
	mutatingName   = "ndsl-webhooks-test"
	validatingName = "ndsl-webhooks-test"
)

var (
	setupOnce sync.Once
	setupErr  error
	dyn       dynamic.Interface
	// webhookURL and webhookCA reach the webhook server setup starts.
	webhookURL string
	webhookCA  []byte
)

// setup starts the webhook server and points the CRDs and the webhook
// configurations at it, once for the package.
func setup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupErr = installWebhooks() })
	if setupErr != nil {
		t.Fatalf("setting up the webhooks: %v", setupErr)
	}
}

// serveWebhooks runs the webhook server on a loopback port until the
// process ends, with the handlers the manager registers, and returns its
// URL and the CA bundle that verifies it.
func serveWebhooks() (string, []byte, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return "", nil, err
	}
	certs, err := dynamiccertificates.NewStaticCertKeyContent("webhooks-test", certPEM, keyPEM)
	if err != nil {
		return "", nil, err
	}
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", nil, err
	}
	// The validators check the requester's rights, as the manager's do.
	access := &webhook.AccessReviewer{Client: client.AuthorizationV1().SubjectAccessReviews()}
	s := webhook.NewServer()
	s.HandleAdmission(webhook.PathMutateApps, "app-defaulting", appcontroller.Defaulter{Options: appcontroller.DefaultAdmissionOptions()})
	s.HandleAdmission(webhook.PathValidateApps, "app-validation", appcontroller.Validator{Access: access})
	s.HandleConversion(webhook.PathConvertApps, "app-conversion", appconversion.Converter{})
	registerPipelineWebhooks(s, access)
	registerPipelineAgreementWebhooks(s, access)
	// The server outlives this test: every test of the package uses it.
	addr, err := s.Serve(context.Background(), "127.0.0.1:0", certs)
	if err != nil {
		return "", nil, err
	}
	// GenerateSelfSignedCertKey returns the serving certificate followed by
	// the CA that signed it; the bundle may hold both.
	return "https://" + addr.String(), certPEM, nil
}

func installWebhooks() error {
	ctx := context.Background()
	url, caBundle, err := serveWebhooks()
	if err != nil {
		return fmt.Errorf("serving the webhooks: %w", err)
	}
	webhookURL, webhookCA = url, caBundle
	if dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		return err
	}
	if err := installCRDs(ctx, url, caBundle); err != nil {
		return err
	}
	client := cp.Client.AdmissionregistrationV1()
	if _, err := client.MutatingWebhookConfigurations().Create(ctx, mutatingConfig(url, caBundle), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the MutatingWebhookConfiguration: %w", err)
	}
	if _, err := client.ValidatingWebhookConfigurations().Create(ctx, validatingConfig(url, caBundle), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the ValidatingWebhookConfiguration: %w", err)
	}
	if err := waitWebhooksActive(ctx); err != nil {
		return err
	}
	return installPolicies(ctx)
}

// installCRDs creates the CRDs of manifests/crd converting through the
// webhook server at url, every version served, as manifests/default's
// kustomize patches do with a Service.
func installCRDs(ctx context.Context, url string, caBundle []byte) error {
	crds, err := controlplane.CRDs()
	if err != nil {
		return err
	}
	return controlplane.InstallCRDs(ctx, cp.Config, controlplane.WithConversion(crds, url, caBundle))
}

func clientConfig(url, path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: caBundle}
}

func rule(group, resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	versions := []string{"v1beta1", "v1"}
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: versions, Resources: []string{resource},
			Scope: ptr.To(admissionregistrationv1.AllScopes),
		},
	}}
}

// matchPolicy is the manifests': Apps and Pipelines are matched at the
// version sent (both are listed).
func matchPolicy(string) *admissionregistrationv1.MatchPolicyType {
	return ptr.To(admissionregistrationv1.Exact)
}

// The configurations follow the manifests' choices: the rules and
// matchPolicy above, failurePolicy Fail, sideEffects None, short timeouts.
func mutatingConfig(url string, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: mutatingName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mutate.apps.ingress.example.com",
			ClientConfig:            clientConfig(url, webhook.PathMutateApps, caBundle),
			Rules:                   rule("ingress.example.com", "apps", admissionregistrationv1.Create, admissionregistrationv1.Update),
			MatchPolicy:             matchPolicy("apps"),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       notByPolicy,
		}},
	}
}

func validatingConfig(url string, caBundle []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	hook := func(name, path, group, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            clientConfig(url, path, caBundle),
			Rules:                   rule(group, resource, ops...),
			MatchPolicy:             matchPolicy(resource),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       notByPolicy,
		}
	}
	pipelines := hook("validate.pipelines.distri-infer.ndsl.cn", webhook.PathValidatePipelines, "distri-infer.ndsl.cn", "pipelines",
		admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete)
	// The Pipelines of TestPipelinePoliciesAgreeWithWebhooks are its own.
	pipelines.ObjectSelector = notInPipelineAgreement
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: validatingName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("validate.apps.ingress.example.com", webhook.PathValidateApps, "ingress.example.com", "apps",
				admissionregistrationv1.Create, admissionregistrationv1.Update),
			pipelines,
		},
	}
}

// waitWebhooksActive waits until the API server calls both App webhooks: a
// dry-run create whose image only the validating webhook refuses is refused.
func waitWebhooksActive(ctx context.Context) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ingress.example.com/v1beta1", "kind": "App",
		"metadata": map[string]any{"name": "probe", "namespace": "default"},
		"spec":     map[string]any{"image": "Not A Reference", "enable_service": true},
	}}
	return pollUntil(ctx, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(appsV1beta1).Namespace("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "not a valid image reference"), nil
	})
}

func pollUntil(ctx context.Context, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// warningsClient is a dynamic client that records the API server's
// warnings, as kubectl prints them.
type warningsClient struct {
	dynamic.Interface
	mu       sync.Mutex
	warnings []string
}

func (w *warningsClient) HandleWarningHeader(_ int, _ string, text string) {
	// The version's own deprecation comes with every v1beta1 request; it is
	// tested in test/integration/crd. These tests look at the webhooks'.
	if strings.Contains(text, "/v1beta1 ") && strings.Contains(text, " is deprecated; use ") {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings recorded so far and forgets them.
func (w *warningsClient) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.warnings
	w.warnings = nil
	return got
}

func newWarningsClient(t *testing.T) *warningsClient {
	t.Helper()
	w := &warningsClient{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = w
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Interface = d
	return w
}

// strict is what kubectl sends by default: unknown or duplicate fields are errors.
var strict = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}

// kubectl runs the real kubectl against the control plane and returns its
// stdout, its stderr (where it prints warnings) and its error.
func kubectl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	path, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, append([]string{"--kubeconfig", cp.KubeconfigPath}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("kubectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), err
}

// sample is the path of a file of manifests/samples.
func sample(t *testing.T, rel string) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "manifests", "samples", rel)
}

// optionsT is the manager's options type, for StartManager's mutate.
type optionsT = options.Options

func fromUnstructured(u *unstructured.Unstructured, obj any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// equalJSON compares two values as JSON documents.
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
