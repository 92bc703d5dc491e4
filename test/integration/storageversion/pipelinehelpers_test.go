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

package storageversion

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// storedPipelineVersion is the apiVersion a Pipeline has in etcd; empty
// when etcd has no such Pipeline.
func storedPipelineVersion(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	version, err := cp.StoredAPIVersion(ctx, controlplane.EtcdKey(pipelinev1.GroupName, "pipelines", "", name))
	if err != nil {
		t.Fatal(err)
	}
	return version
}

// waitPipelinesStoredAt waits until new Pipelines are stored at version,
// with a probe Pipeline whose children would go to ns.
func waitPipelinesStoredAt(t *testing.T, client versioned.Interface, ns, version string) {
	t.Helper()
	const probe = "probe"
	want := pipelinev1.GroupName + "/" + version
	framework.Eventually(t, time.Minute, "a new Pipeline to be stored as "+want, func(ctx context.Context) (bool, error) {
		_ = client.PipelineV1().Pipelines().Delete(ctx, probe, metav1.DeleteOptions{})
		p := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: probe}, Spec: pipelinev1.PipelineSpec{
			Namespace:    ns,
			Steps:        []pipelinev1.PipelineStep{{Model: "m", Image: "nginx:1.27"}},
			ModelStorage: pipelinev1.ModelStorage{NFS: &pipelinev1.NFSStorage{Server: "192.0.2.10", Path: "/probe"}},
		}}
		if _, err := client.PipelineV1().Pipelines().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return false, err
		}
		if got := storedPipelineVersion(ctx, t, probe); got != want {
			return false, fmt.Errorf("stored as %q", got)
		}
		return true, nil
	})
	if err := client.PipelineV1().Pipelines().Delete(context.Background(), probe, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// pipelineState is what the migration must not change of a Pipeline, and
// the resourceVersion that shows a write.
type pipelineState struct {
	v1beta1Spec, v1Spec string
	resourceVersion     string
}

// readPipelines reads every Pipeline named through both versions.
func readPipelines(ctx context.Context, t *testing.T, client versioned.Interface, names []string) map[string]pipelineState {
	t.Helper()
	states := map[string]pipelineState{}
	for _, name := range names {
		old, err := client.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading Pipeline %s as v1beta1: %v", name, err)
		}
		cur, err := client.PipelineV1().Pipelines().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading Pipeline %s as v1: %v", name, err)
		}
		states[name] = pipelineState{v1beta1Spec: specJSON(t, old.Spec), v1Spec: specJSON(t, cur.Spec), resourceVersion: cur.ResourceVersion}
	}
	return states
}

// child is what the upgrade may change of a Pipeline's child: the API
// version its controller reference names, and nothing else.
type child struct {
	uid, spec, owner string
}

// readChildren reads the Pipelines' children in ns, and their volumes.
func readChildren(ctx context.Context, t *testing.T, ns string) map[string]child {
	t.Helper()
	managed := metav1.ListOptions{LabelSelector: controller.ManagedByLabel + "=" + controller.ManagedByValue}
	out := map[string]child{}
	add := func(kind string, obj metav1.Object, spec any) {
		owner := ""
		if ref := metav1.GetControllerOf(obj); ref != nil {
			owner = ref.APIVersion
		}
		out[kind+" "+obj.GetName()] = child{uid: string(obj.GetUID()), spec: specJSON(t, spec), owner: owner}
	}
	kube := cp.Client
	deployments, err := kube.AppsV1().Deployments(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range deployments.Items {
		add("Deployment", &deployments.Items[i], deployments.Items[i].Spec)
	}
	services, err := kube.CoreV1().Services(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range services.Items {
		add("Service", &services.Items[i], services.Items[i].Spec)
	}
	claims, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		add("PersistentVolumeClaim", &claims.Items[i], claims.Items[i].Spec)
	}
	volumes, err := kube.CoreV1().PersistentVolumes().List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range volumes.Items {
		if ref := volumes.Items[i].Spec.ClaimRef; ref != nil && ref.Namespace == ns {
			add("PersistentVolume", &volumes.Items[i], volumes.Items[i].Spec)
		}
	}
	return out
}

// diffChildren lists, in words, how after differs from before beyond each
// controller reference moving from v1beta1 to v1.
func diffChildren(before, after map[string]child) []string {
	var d []string
	for name, was := range before {
		now, ok := after[name]
		switch {
		case !ok:
			d = append(d, name+" is gone")
		case now.uid != was.uid:
			d = append(d, fmt.Sprintf("%s was replaced: uid %s → %s", name, was.uid, now.uid))
		case now.spec != was.spec:
			d = append(d, fmt.Sprintf("%s: spec %s → %s", name, was.spec, now.spec))
		case was.owner != "distri-infer.ndsl.cn/v1beta1" || now.owner != "distri-infer.ndsl.cn/v1":
			d = append(d, fmt.Sprintf("%s: controller reference %q → %q, want v1beta1 → v1", name, was.owner, now.owner))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			d = append(d, name+" is new")
		}
	}
	if len(before) == 0 {
		d = append(d, "no children before the upgrade")
	}
	sort.Strings(d)
	return d
}

// ownedAtV1beta1 has every child of the Pipelines in ns name its Pipeline
// at v1beta1, as the earlier release's manager created them: the same
// Create's field manager, its owner reference's apiVersion alone changed.
func ownedAtV1beta1(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	patch := []byte(`[{"op":"test","path":"/metadata/ownerReferences/0/kind","value":"Pipeline"},` +
		`{"op":"replace","path":"/metadata/ownerReferences/0/apiVersion","value":"distri-infer.ndsl.cn/v1beta1"}]`)
	opts := metav1.PatchOptions{FieldManager: controller.FieldManager}
	kube := cp.Client
	for name := range readChildren(ctx, t, ns) {
		kind, object, _ := strings.Cut(name, " ")
		var err error
		switch kind {
		case "Deployment":
			_, err = kube.AppsV1().Deployments(ns).Patch(ctx, object, types.JSONPatchType, patch, opts)
		case "Service":
			_, err = kube.CoreV1().Services(ns).Patch(ctx, object, types.JSONPatchType, patch, opts)
		case "PersistentVolumeClaim":
			_, err = kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, object, types.JSONPatchType, patch, opts)
		case "PersistentVolume":
			_, err = kube.CoreV1().PersistentVolumes().Patch(ctx, object, types.JSONPatchType, patch, opts)
		}
		if err != nil {
			t.Fatalf("making %s name its Pipeline at v1beta1: %v", name, err)
		}
	}
}
