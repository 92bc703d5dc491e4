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
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// storedObject is one object of the migration test: where etcd keeps it,
// and how to read it.
type storedObject struct {
	gvr       schema.GroupVersionResource // at v1beta1
	namespace string
	name      string
}

func (o storedObject) etcdKey() string {
	return controlplane.EtcdKey(o.gvr.Group, o.gvr.Resource, o.namespace, o.name)
}

// The storage-version migration recipe (hack/migrate-storage.sh, issue 23):
// objects written while v1beta1 is the storage version are, once the CRDs
// store v1 and the script has run, stored at v1 in etcd, unchanged as read
// through either version, and status.storedVersions is [v1]. A second run
// writes nothing.
func TestStorageMigrationRecipe(t *testing.T) {
	setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := framework.CreateNamespace(t, cp.Client)
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	// Apps and Pipelines stored at v1beta1, as releases before v1 stored them.
	crdNames := []string{"apps.ingress.example.com", "pipelines.distri-infer.ndsl.cn"}
	for _, name := range crdNames {
		setStorageVersion(ctx, t, crds, name, "v1beta1")
		t.Cleanup(func() { setStorageVersion(context.Background(), t, crds, name, "v1") })
	}
	waitAppsStoredAt(ctx, t, ns, "v1beta1")
	waitPipelinesStoredAt(ctx, t, "v1beta1")

	objects := []storedObject{
		{gvr: appsV1beta1, namespace: ns, name: "migrate-a"},
		{gvr: appsV1beta1, namespace: ns, name: "migrate-b"},
		{gvr: pipelinesV1beta1, name: "migrate-p"},
	}
	for _, o := range objects {
		obj := appObject("v1beta1", o.name, map[string]any{"image": "nginx:1.27", "replicas": int64(2), "enable_service": true})
		if o.gvr == pipelinesV1beta1 {
			obj = allowlistPipeline(o.name, "10.0.0.1", "/models", "nginx:1.27")
			obj.SetLabels(nil)
		}
		if _, err := dyn.Resource(o.gvr).Namespace(o.namespace).Create(ctx, obj, strict); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = dyn.Resource(o.gvr).Namespace(o.namespace).Delete(context.Background(), o.name, metav1.DeleteOptions{})
		})
		if got := storedAPIVersion(ctx, t, o); got != o.gvr.GroupVersion().String() {
			t.Fatalf("%s is stored as %s before the migration, want %s", o.etcdKey(), got, o.gvr.GroupVersion())
		}
	}
	before := readAll(ctx, t, objects)

	for _, name := range crdNames {
		setStorageVersion(ctx, t, crds, name, "v1")
	}
	waitAppsStoredAt(ctx, t, ns, "v1")
	waitPipelinesStoredAt(ctx, t, "v1")
	for _, o := range objects {
		if got := storedAPIVersion(ctx, t, o); got != o.gvr.GroupVersion().String() {
			t.Fatalf("%s is stored as %s before the script ran, want it still at %s", o.etcdKey(), got, o.gvr.GroupVersion())
		}
	}

	runMigrateStorage(t, crdNames...)
	for _, o := range objects {
		want := o.gvr.Group + "/v1"
		if got := storedAPIVersion(ctx, t, o); got != want {
			t.Errorf("%s is stored as %s after the migration, want %s", o.etcdKey(), got, want)
		}
	}
	for _, name := range crdNames {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(crd.Status.StoredVersions, ","); got != "v1" {
			t.Errorf("%s status.storedVersions = [%s], want [v1]", name, got)
		}
	}
	after := readAll(ctx, t, objects)
	for key, was := range before {
		now := after[key]
		if now.generation != was.generation || now.spec != was.spec {
			t.Errorf("%s changed in the migration: generation %d → %d, spec %s → %s", key, was.generation, now.generation, was.spec, now.spec)
		}
	}

	// Rerun: everything is at v1 already, so nothing is written.
	runMigrateStorage(t, crdNames...)
	again := readAll(ctx, t, objects)
	for key, was := range after {
		if now := again[key]; now.resourceVersion != was.resourceVersion {
			t.Errorf("%s was written by the second run (resourceVersion %s → %s)", key, was.resourceVersion, now.resourceVersion)
		}
	}
}

// waitAppsStoredAt waits until a new App is stored at version: the API
// server reloads a CRD's storage asynchronously.
func waitAppsStoredAt(ctx context.Context, t *testing.T, ns, version string) {
	t.Helper()
	probe := storedObject{gvr: appsV1beta1, namespace: ns, name: "migrate-probe"}
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_ = dyn.Resource(appsV1beta1).Namespace(ns).Delete(ctx, probe.name, metav1.DeleteOptions{})
		if _, err := dyn.Resource(appsV1beta1).Namespace(ns).Create(ctx, appObject("v1beta1", probe.name, map[string]any{"image": "nginx:1.27", "enable_service": true}), strict); err != nil {
			last = err.Error()
			return false, nil
		}
		last = "stored as " + storedAPIVersion(ctx, t, probe)
		return last == "stored as ingress.example.com/"+version, nil
	}); err != nil {
		t.Fatalf("new Apps are not stored at %s after the storage version changed: %v (last: %s)", version, err, last)
	}
	if err := dyn.Resource(appsV1beta1).Namespace(ns).Delete(ctx, probe.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPipelinesStoredAt waits until a new Pipeline is stored at version.
func waitPipelinesStoredAt(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	probe := storedObject{gvr: pipelinesV1beta1, name: "migrate-probe"}
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_ = dyn.Resource(pipelinesV1beta1).Delete(ctx, probe.name, metav1.DeleteOptions{})
		obj := allowlistPipeline(probe.name, "10.0.0.1", "/probe", "nginx:1.27")
		obj.SetLabels(nil)
		if _, err := dyn.Resource(pipelinesV1beta1).Create(ctx, obj, strict); err != nil {
			last = err.Error()
			return false, nil
		}
		last = "stored as " + storedAPIVersion(ctx, t, probe)
		return last == "stored as distri-infer.ndsl.cn/"+version, nil
	}); err != nil {
		t.Fatalf("new Pipelines are not stored at %s after the storage version changed: %v (last: %s)", version, err, last)
	}
	if err := dyn.Resource(pipelinesV1beta1).Delete(ctx, probe.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readState is what the migration must not change, and what shows a write.
type readState struct {
	generation      int64
	spec            string
	resourceVersion string
}

// readAll reads every object through v1beta1 and v1.
func readAll(ctx context.Context, t *testing.T, objects []storedObject) map[string]readState {
	t.Helper()
	states := map[string]readState{}
	for _, o := range objects {
		for _, version := range []string{"v1beta1", "v1"} {
			gvr := o.gvr
			gvr.Version = version
			obj, err := dyn.Resource(gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("reading %s at %s: %v", o.name, version, err)
			}
			spec, _ := json.Marshal(obj.Object["spec"])
			states[o.etcdKey()+"@"+version] = readState{obj.GetGeneration(), string(spec), obj.GetResourceVersion()}
		}
	}
	return states
}

// setStorageVersion makes version the CRD's only storage version.
func setStorageVersion(ctx context.Context, t *testing.T, crds interface {
	Get(context.Context, string, metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(context.Context, *apiextensionsv1.CustomResourceDefinition, metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}, name, version string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
		}
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("making %s the storage version of %s: %v", version, name, err)
	}
}

// runMigrateStorage runs the recipe's script as a user would, with kubectl.
func runMigrateStorage(t *testing.T, crds ...string) {
	t.Helper()
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "migrate-storage.sh"), crds...)
	cmd.Env = append(os.Environ(), "KUBECTL="+kubectl, "KUBECONFIG="+cp.KubeconfigPath)
	out, err := cmd.CombinedOutput()
	t.Logf("hack/migrate-storage.sh:\n%s", out)
	if err != nil {
		t.Fatalf("hack/migrate-storage.sh: %v", err)
	}
}

// storedAPIVersion reads the object's apiVersion as etcd holds it: custom
// resources are stored as JSON.
func storedAPIVersion(ctx context.Context, t *testing.T, o storedObject) string {
	t.Helper()
	version, err := cp.StoredAPIVersion(ctx, o.etcdKey())
	if err != nil {
		t.Fatal(err)
	}
	return version
}
