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

package userroles

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

func newApp(name string) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)},
	}
}

func newPipeline(name, namespace string) *pipelinev1beta1.Pipeline {
	return &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps:     []pipelinev1beta1.PipelineStep{{Model: "m", Image: "nginx:1.27", Location: "node-1"}},
			Namespace: namespace,
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "192.0.2.10", "share": "/models"},
			},
		},
	}
}

// Issue 23: a developer bound to the built-in edit role in a namespace, by
// a RoleBinding, creates an App there and scales it with kubectl scale; the
// binding grants nothing in other namespaces, and no Pipeline.
func TestEditInANamespaceWritesAndScalesApps(t *testing.T) {
	install(t)
	ns := framework.CreateNamespace(t, cp.Client)
	other := framework.CreateNamespace(t, cp.Client)
	const user = "developer"
	bindInNamespace(t, ns, "edit", user)
	apps := userClient(t, user).AppV1beta1()

	allowedSoon(t, "edit in "+ns+" to create an App", func(ctx context.Context) error {
		_, err := apps.Apps(ns).Create(ctx, newApp("web"), metav1.CreateOptions{})
		return err
	})
	if _, err := kubectl("--as="+user, "-n", ns, "scale", "apps."+appGroup+"/web", "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	app, err := crdClient(t).AppV1beta1().Apps(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if app.Spec.Replicas == nil || *app.Spec.Replicas != 3 {
		t.Errorf("after kubectl scale --replicas=3 the App's spec.replicas is %v", app.Spec.Replicas)
	}
	if err := apps.Apps(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Errorf("edit in %s deleting its App: %v", ns, err)
	}

	_, err = apps.Apps(other).Create(context.Background(), newApp("web"), metav1.CreateOptions{})
	forbidden(t, "edit in "+ns+" creating an App in "+other, err)
	_, err = userClient(t, user).PipelineV1beta1().Pipelines().Create(context.Background(), newPipeline("by-editor", ns), metav1.CreateOptions{})
	forbidden(t, "edit in "+ns+" creating a Pipeline", err)
}

// A reader bound to view in a namespace lists and reads Apps there and
// changes none.
func TestViewInANamespaceReadsApps(t *testing.T) {
	install(t)
	ns := framework.CreateNamespace(t, cp.Client)
	if _, err := crdClient(t).AppV1beta1().Apps(ns).Create(context.Background(), newApp("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const user = "reader"
	bindInNamespace(t, ns, "view", user)
	apps := userClient(t, user).AppV1beta1().Apps(ns)

	allowedSoon(t, "view in "+ns+" to list Apps", func(ctx context.Context) error {
		list, err := apps.List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) != 1 {
			t.Errorf("view in %s lists %d Apps, want 1", ns, len(list.Items))
		}
		return err
	})
	if _, err := kubectl("--as="+user, "-n", ns, "get", "apps."+appGroup+"/web", "--subresource=scale"); err != nil {
		t.Errorf("view in %s reading an App's scale: %v", ns, err)
	}
	_, err := apps.Create(context.Background(), newApp("other"), metav1.CreateOptions{})
	forbidden(t, "view in "+ns+" creating an App", err)
	_, err = kubectl("--as="+user, "-n", ns, "scale", "apps."+appGroup+"/web", "--replicas=2")
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("view in %s scaling an App: %v, want forbidden", ns, err)
	}
}

// Creating a Pipeline is a cluster-level privilege: not even admin bound
// cluster-wide has it; the pipeline-author role, bound cluster-wide by an
// administrator, grants it. view bound cluster-wide reads Pipelines.
func TestPipelinesNeedTheAuthorRole(t *testing.T) {
	install(t)
	ns := framework.CreateNamespace(t, cp.Client)

	const admin = "namespace-admin-everywhere"
	bindClusterWide(t, "admin", admin)
	allowedSoon(t, "admin bound cluster-wide to create an App", func(ctx context.Context) error {
		_, err := userClient(t, admin).AppV1beta1().Apps(ns).Create(ctx, newApp("by-admin"), metav1.CreateOptions{})
		return err
	})
	_, err := userClient(t, admin).PipelineV1beta1().Pipelines().Create(context.Background(), newPipeline("by-admin", ns), metav1.CreateOptions{})
	forbidden(t, "admin bound cluster-wide creating a Pipeline", err)

	const author = "pipeline-author"
	bindClusterWide(t, "ndsl-controller-manager:pipeline-author", author)
	pipelines := userClient(t, author).PipelineV1beta1().Pipelines()
	allowedSoon(t, "pipeline-author to create a Pipeline", func(ctx context.Context) error {
		_, err := pipelines.Create(ctx, newPipeline(ns, ns), metav1.CreateOptions{})
		return err
	})
	if _, err := pipelines.Patch(context.Background(), ns, types.MergePatchType,
		[]byte(`{"spec":{"listenPort":8080}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("pipeline-author patching its Pipeline: %v", err)
	}

	const reader = "cluster-reader"
	bindClusterWide(t, "view", reader)
	allowedSoon(t, "view bound cluster-wide to read Pipelines", func(ctx context.Context) error {
		_, err := userClient(t, reader).PipelineV1beta1().Pipelines().Get(ctx, ns, metav1.GetOptions{})
		return err
	})
	err = userClient(t, reader).PipelineV1beta1().Pipelines().Delete(context.Background(), ns, metav1.DeleteOptions{})
	forbidden(t, "view bound cluster-wide deleting a Pipeline", err)

	if err := pipelines.Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Errorf("pipeline-author deleting its Pipeline: %v", err)
	}
}

// crdClient is an admin client for Apps and Pipelines.
func crdClient(t *testing.T) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
