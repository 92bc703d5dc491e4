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
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Issue 38: a release installed with the App and Pipeline admission webhooks
// (admission.by webhooks, or auto on a cluster before Kubernetes 1.36)
// upgraded with auto on 1.36 swaps them for the policies, against a real
// API server that serves them (helm asks it, not --kube-version); a
// rollback swaps them back.
func TestChartSwitchesAdmission(t *testing.T) {
	const ns = "platform"
	ctx := context.Background()
	installing(t, ns)
	deploy := func(step string, by string, verb ...string) {
		t.Helper()
		args := append(verb, "--kubeconfig", cp.KubeconfigPath, "--namespace", ns)
		if by != "" {
			args = append(args, "-f", valuesFile(t, map[string]any{"admission": map[string]any{"by": by}}))
		}
		if out, err := helm(t, args...); err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
	}
	state := func() (hooks []string, policies bool) {
		t.Helper()
		_, err := cp.Client.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, "ndsl-app-defaulting", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return framework.CalledWebhooks(ctx, t, cp.Client), err == nil
	}
	withHooks := []string{"mutate.apps.ingress.example.com", "validate.apps.ingress.example.com", "validate.pipelines.distri-infer.ndsl.cn"}
	// Beside the policies the Pipeline webhook fails open (values_test.go).
	pipelineOnly := []string{"validate.pipelines.distri-infer.ndsl.cn"}

	deploy("helm install with the webhooks", "webhooks", "install", release, chartDir(t), "--create-namespace")
	if hooks, policies := state(); !slices.Equal(hooks, withHooks) || policies {
		t.Errorf("installed with admission.by webhooks: webhooks %v, policies %v; want %v, none", hooks, policies, withHooks)
	}
	deploy("helm upgrade, auto", "auto", "upgrade", release, chartDir(t))
	if hooks, policies := state(); !slices.Equal(hooks, pipelineOnly) || !policies {
		t.Errorf("upgraded with admission.by auto: webhooks %v, policies %v; want %v and the policies", hooks, policies, pipelineOnly)
	}
	deploy("helm rollback", "", "rollback", release, "1")
	if hooks, policies := state(); !slices.Equal(hooks, withHooks) || policies {
		t.Errorf("rolled back: webhooks %v, policies %v; want %v, none", hooks, policies, withHooks)
	}
}

// The design notes' inversion, turned off by app.invertEnableIngress=false
// or by the flag in extraArgs, goes from both paths: the flag for the
// webhook, the defaulting policy (whose only work it is) for the API server.
func TestChartInversionOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		invert bool
	}{
		{"default", nil, true},
		{"app.invertEnableIngress=false", map[string]any{"app": map[string]any{"invertEnableIngress": false}}, false},
		{"extraArgs", map[string]any{"extraArgs": []any{"--app-invert-enable-ingress=false"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objects := render(t, "ndsl-system", tc.values)
			if got := len(ofKind(objects, "MutatingAdmissionPolicy")) + len(ofKind(objects, "MutatingAdmissionPolicyBinding")); got != map[bool]int{true: 2, false: 0}[tc.invert] {
				t.Errorf("%d MutatingAdmissionPolicies and bindings; want them only while the inversion is on (%v)", got, tc.invert)
			}
			if got := parseArgs(t, takeArgs(t, one(t, objects, "Deployment", "controller-manager"))).AppAdmission.InvertEnableIngress; got != tc.invert {
				t.Errorf("the manager's --app-invert-enable-ingress is %v, want %v", got, tc.invert)
			}
		})
	}
}
