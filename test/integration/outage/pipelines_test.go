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

package outage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// pipelineVersion is the version TestPipelinesWithTheManagerDown writes
// and reads Pipelines at: the one they are stored at, the only one the API
// server serves without the manager's conversion webhook.
const pipelineVersion = "v1"

// pipelineManifests are a Pipeline of each version, as its author writes
// it, with %s for its name and its first step's image.
var pipelineManifests = map[string]string{
	"v1beta1": `apiVersion: distri-infer.ndsl.cn/v1beta1
kind: Pipeline
metadata:
  name: %s
spec:
  steps:
    - model: facedetection-1
      image: %s
      replicas: 2
  modelStorage:
    csiParameter:
      server: 192.168.20.235
      share: /home/aiedge/csiTest
      type: nfs
`,
	"v1": `apiVersion: distri-infer.ndsl.cn/v1
kind: Pipeline
metadata:
  name: %s
spec:
  steps:
    - model: facedetection-1
      image: %s
      replicas: 2
  modelStorage:
    nfs:
      server: 192.168.20.235
      path: /home/aiedge/csiTest
`,
}

// With manifests/default installed and no manager pod up, a Pipeline
// author (the shipped pipeline-author role, and edit in the Pipelines'
// default namespace) creates, reads, lists, watches, updates and deletes a
// Pipeline with kubectl at the version Pipelines are stored at: the
// admission policies check it as the webhook does, the allowlists of the
// manager's flags and the author's rights included. Another author,
// without rights in that namespace, is refused.
func TestPipelinesWithTheManagerDown(t *testing.T) {
	ctx := context.Background()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"default", "pipeline-namespace"} {
		if out, err := kubectl(t, "", "apply", "-k", filepath.Join(root, "manifests", dir)); err != nil {
			t.Fatalf("kubectl apply -k manifests/%s: %v\n%s", dir, err, out)
		}
	}
	crds, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := controlplane.WaitForCRDs(ctx, crds, timeout, "pipelines.distri-infer.ndsl.cn"); err != nil {
		t.Fatal(err)
	}
	// carol authors Pipelines whose children go to the default namespace,
	// pipeline (manifests/default's --pipeline-namespace); dave may write
	// Pipelines but nothing in that namespace.
	for _, user := range []string{"carol", "dave"} {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "outage-" + user + "-pipeline-author"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ndsl-controller-manager:pipeline-author"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "outage-carol"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings("pipeline").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "outage-" + rand.String(5)
	manifest := func(image string) string {
		file := filepath.Join(t.TempDir(), "pipeline.yaml")
		if err := os.WriteFile(file, fmt.Appendf(nil, pipelineManifests[pipelineVersion], name, image), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	resource := "pipelines." + pipelineVersion + ".distri-infer.ndsl.cn"
	gvr := schema.GroupVersionResource{Group: "distri-infer.ndsl.cn", Version: pipelineVersion, Resource: "pipelines"}

	// The API server loads new policies, and RBAC new bindings, within
	// seconds: until the policy refuses an image ID (which names no
	// repository, whatever the allowlists), nothing is created.
	framework.Eventually(t, timeout, "the Pipeline policy to act", func(ctx context.Context) (bool, error) {
		out, err := kubectl(t, "carol", "apply", "--dry-run=server", "-f", manifest(strings.Repeat("ab", 32)))
		return err != nil && strings.Contains(out, "ValidatingAdmissionPolicy 'ndsl-pipeline-validation'") &&
			strings.Contains(out, "names no repository"), nil
	})
	var out string
	framework.Eventually(t, timeout, "carol's Pipeline to be created", func(ctx context.Context) (bool, error) {
		out, err = kubectl(t, "carol", "apply", "-f", manifest("nginx:1.27"))
		return err == nil, nil
	})
	if !strings.Contains(out, "pipeline.distri-infer.ndsl.cn/"+name+" created") {
		t.Errorf("kubectl printed %q; want the Pipeline created", out)
	}
	p, err := userClient(t, "carol").Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("carol getting her Pipeline: %v", err)
	}

	// List and watch, as kubectl names them.
	out, err = kubectl(t, "carol", "get", resource, "-o", "name")
	if err != nil || !slices.Contains(strings.Split(out, "\n"), "pipeline.distri-infer.ndsl.cn/"+name) {
		t.Errorf("kubectl get %s: %v, %q", resource, err, out)
	}
	watchCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := userClient(t, "carol").Resource(gvr).Watch(watchCtx, metav1.ListOptions{ResourceVersion: p.GetResourceVersion()})
	if err != nil {
		t.Fatalf("watching Pipelines: %v", err)
	}
	defer w.Stop()

	// Updates: an image ID and kube-system are refused with the webhook's
	// reasons; another image is stored and seen by the watch.
	for _, bad := range []struct{ patch, want string }{
		{`{"spec":{"steps":[{"model":"facedetection-1","image":"` + strings.Repeat("cd", 32) + `"}]}}`, "names no repository"},
		{`{"spec":{"namespace":"kube-system"}}`, "namespace kube-system is not allowed for Pipelines (--pipeline-allowed-namespaces)"},
		{`{"spec":{"steps":[{"model":"facedetection-1","image":"nginx:1.27","replicas":101}]}}`, "more than the 100 allowed (--pipeline-max-replicas)"},
	} {
		if out, err := kubectl(t, "carol", "patch", resource, name, "--type=merge", "-p", bad.patch); err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("patching %s: %v, %q; want it refused: %s", bad.patch, err, out, bad.want)
		}
	}
	if out, err := kubectl(t, "carol", "apply", "-f", manifest("nginx:1.28")); err != nil {
		t.Errorf("carol updating the image: %v, %q", err, out)
	}
	for seen := false; !seen; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended before it saw the update")
			}
			u, _ := ev.Object.(*unstructured.Unstructured)
			steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "steps")
			seen = len(steps) == 1 && steps[0].(map[string]any)["image"] == "nginx:1.28"
		case <-watchCtx.Done():
			t.Fatal("the watch did not see the update")
		}
	}

	// Tenancy holds without the manager: dave may write Pipelines but not
	// their children in pipeline, so he neither changes nor deletes carol's.
	if out, err := kubectl(t, "dave", "apply", "-f", manifest("nginx:1.29")); err == nil ||
		!strings.Contains(out, `user "dave" may not create deployments.apps in namespace "pipeline"`) {
		t.Errorf("dave re-imaging carol's Pipeline: %v, %q; want it refused for his rights", err, out)
	}
	if out, err := kubectl(t, "dave", "delete", resource, name, "--wait=false"); err == nil ||
		!strings.Contains(out, `user "dave" may not delete deployments.apps in namespace "pipeline"`) {
		t.Errorf("dave deleting carol's Pipeline: %v, %q; want it refused for his rights", err, out)
	}

	if out, err := kubectl(t, "carol", "delete", resource, name, "--wait=false"); err != nil {
		t.Fatalf("carol deleting her Pipeline: %v, %q", err, out)
	}
	framework.Eventually(t, timeout, "the Pipeline to be gone", func(ctx context.Context) (bool, error) {
		_, err := userClient(t, "carol").Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})

}
