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
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// allowlistLabel selects the Pipelines the allowlist webhook admits.
const allowlistLabel = "test.ndsl.cn/allowlist"

// allowlistPipeline is a labelled Pipeline with one step per image.
func allowlistPipeline(name, server, share string, images ...string) *unstructured.Unstructured {
	var steps []any
	for i, image := range images {
		steps = append(steps, map[string]any{"model": "m" + string(rune('a'+i)), "image": image})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "distri-infer.ndsl.cn/v1beta1", "kind": "Pipeline",
		"metadata": map[string]any{"name": name, "labels": map[string]any{allowlistLabel: "on"}},
		"spec": map[string]any{
			"steps":        steps,
			"modelStorage": map[string]any{"type": "nfs", "csiParameter": map[string]any{"server": server, "share": share}},
		},
	}}
}

// withSpec sets spec.<key> of a Pipeline.
func withSpec(u *unstructured.Unstructured, key string, value any) *unstructured.Unstructured {
	u.Object["spec"].(map[string]any)[key] = value
	return u
}

// withReplicas sets the first step's replicas.
func withReplicas(u *unstructured.Unstructured, n int64) *unstructured.Unstructured {
	u.Object["spec"].(map[string]any)["steps"].([]any)[0].(map[string]any)["replicas"] = n
	return u
}

// installAllowlistWebhook points a validating webhook for the labelled
// Pipelines at the allowlist validator and waits until the API server
// calls it.
func installAllowlistWebhook(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	const name = "ndsl-webhooks-test-allowlist"
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "allowlist.pipelines.distri-infer.ndsl.cn",
			ClientConfig:            clientConfig(webhookURL, pathValidatePipelinesAllowlist, webhookCA),
			Rules:                   rule("distri-infer.ndsl.cn", "pipelines", admissionregistrationv1.Create, admissionregistrationv1.Update),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{allowlistLabel: "on"}},
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	client := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := client.Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	probe := allowlistPipeline("allowlist-probe", "10.0.0.66", "/x", "nginx:1.27")
	err := pollUntil(ctx, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(pipelinesV1beta1).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "--pipeline-allowed-nfs"), nil
	})
	if err != nil {
		t.Fatalf("waiting for the allowlist webhook to be called: %v", err)
	}
}

// With --pipeline-allowed-nfs and --pipeline-allowed-images, the validating
// webhook refuses a Pipeline naming another NFS server, a share beside the
// allowed prefix or escaping it with "..", or an image outside the
// prefixes, with a message naming what is allowed; it admits one inside
// both lists, and a change of an already stored Pipeline that leaves its
// storage and images as they were (issue 25, items 1 and 3).
func TestPipelineAllowlistAdmission(t *testing.T) {
	setup(t)
	installAllowlistWebhook(t)
	ctx := context.Background()
	const (
		nfsAllowed   = "allowed (--pipeline-allowed-nfs): 192.168.20.235:/home/aiedge"
		imageAllowed = "allowed prefixes (--pipeline-allowed-images): docker.io/library/nginx"
	)
	cases := []struct {
		name    string
		obj     *unstructured.Unstructured
		wantErr []string // nil: admitted
	}{{
		name: "allowed", obj: allowlistPipeline("allowlist-ok", "192.168.20.235", "/home/aiedge/csiTest", "nginx:latest", "docker.io/library/nginx:1.27"),
	}, {
		name: "other server", obj: allowlistPipeline("allowlist-server", "10.0.0.66", "/home/aiedge/csiTest", "nginx:latest"),
		wantErr: []string{"spec.modelStorage.csiParameter[server]", "NFS export 10.0.0.66:/home/aiedge/csiTest is not allowed", nfsAllowed},
	}, {
		name: "share beside the prefix", obj: allowlistPipeline("allowlist-beside", "192.168.20.235", "/home/aiedge-evil", "nginx:latest"),
		wantErr: []string{"spec.modelStorage.csiParameter[share]", "/home/aiedge-evil is not allowed", nfsAllowed},
	}, {
		name: "dot-dot escape", obj: allowlistPipeline("allowlist-dotdot", "192.168.20.235", "/home/aiedge/../../etc", "nginx:latest"),
		wantErr: []string{"spec.modelStorage.csiParameter[share]", "/home/aiedge/../../etc is not allowed", nfsAllowed},
	}, {
		name: "neighbour image", obj: allowlistPipeline("allowlist-neighbour", "192.168.20.235", "/home/aiedge", "nginx:latest", "nginx-evil:latest"),
		wantErr: []string{"spec.steps[1].image", "docker.io/library/nginx-evil:latest", imageAllowed},
	}, {
		name: "other registry", obj: allowlistPipeline("allowlist-registry", "192.168.20.235", "/home/aiedge", "registry.evil.example/library/nginx:latest"),
		wantErr: []string{"spec.steps[0].image", "registry.evil.example/library/nginx:latest", imageAllowed},
	}, {
		// "*" leaves out the cluster's own namespaces (issue 35, item 4).
		name: "kube-system", obj: withSpec(allowlistPipeline("allowlist-system", "192.168.20.235", "/home/aiedge", "nginx:latest"), "namespace", "kube-system"),
		wantErr: []string{"spec.namespace", "namespace kube-system is not allowed for Pipelines (--pipeline-allowed-namespaces"},
	}, {
		name: "team namespace", obj: withSpec(allowlistPipeline("allowlist-team", "192.168.20.235", "/home/aiedge", "nginx:latest"), "namespace", "team-a"),
	}, {
		// Bounded replicas (issue 35, item 8).
		name: "replicas over the bound", obj: withReplicas(allowlistPipeline("allowlist-replicas", "192.168.20.235", "/home/aiedge", "nginx:latest"), 11),
		wantErr: []string{"spec.steps[0].replicas", "step ma asks for 11 replicas, more than the 10 allowed (--pipeline-max-replicas)"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dyn.Resource(pipelinesV1beta1).Create(ctx, tc.obj, strict)
			t.Logf("error: %v", err)
			if err == nil {
				t.Cleanup(func() {
					_ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), tc.obj.GetName(), metav1.DeleteOptions{})
				})
			}
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != nil && !apierrors.IsInvalid(err):
				t.Fatalf("error %v; want Invalid with %q", err, tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	// A Pipeline stored before the list (here: without the label) may still
	// be relabelled or annotated, but not moved to another forbidden export.
	old := allowlistPipeline("allowlist-stored", "10.0.0.66", "/srv", "nginx-evil:latest")
	old.SetLabels(nil)
	if _, err := dyn.Resource(pipelinesV1beta1).Create(ctx, old, strict); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(pipelinesV1beta1).Delete(context.Background(), old.GetName(), metav1.DeleteOptions{})
	})
	stored, err := dyn.Resource(pipelinesV1beta1).Get(ctx, old.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored.SetLabels(map[string]string{allowlistLabel: "on"})
	if stored, err = dyn.Resource(pipelinesV1beta1).Update(ctx, stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("relabelling a stored Pipeline whose storage and images did not change: %v", err)
	}
	if err := unstructured.SetNestedField(stored.Object, "/srv/other", "spec", "modelStorage", "csiParameter", "share"); err != nil {
		t.Fatal(err)
	}
	_, err = dyn.Resource(pipelinesV1beta1).Update(ctx, stored, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), nfsAllowed) {
		t.Errorf("moving a stored Pipeline to another forbidden export: error %v, want Invalid naming %q", err, nfsAllowed)
	}
}
