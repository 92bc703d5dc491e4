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
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// crdsAt returns the CRDs of manifests/crd, every version served through
// this process's conversion webhook, each stored at storage (an earlier
// release stored both at v1beta1).
func crdsAt(t *testing.T, storage string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := controlplane.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	url, caBundle, err := controlplane.ServeConversion()
	if err != nil {
		t.Fatal(err)
	}
	crds = controlplane.WithConversion(crds, url, caBundle)
	for _, crd := range crds {
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == storage
		}
	}
	return crds
}

// crdAt is the CRD called name of crdsAt.
func crdAt(t *testing.T, name, storage string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	for _, crd := range crdsAt(t, storage) {
		if crd.Name == name {
			return crd
		}
	}
	t.Fatalf("no CRD %s in manifests/crd", name)
	return nil
}

// upgradeCRD gives the CRD called name the versions of the current
// release, as its install's apply does: the storage version becomes v1.
// The other CRD stays as it is.
func upgradeCRD(ctx context.Context, t *testing.T, crds apiextensionsclient.Interface, name string) {
	t.Helper()
	current := crdAt(t, name, "v1")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Versions = current.Spec.Versions
		_, err = crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("making v1 the storage version of %s: %v", name, err)
	}
}

// storedAPIVersion is the apiVersion an App has in etcd; empty when etcd
// has no such App.
func storedAPIVersion(ctx context.Context, t *testing.T, app types.NamespacedName) string {
	t.Helper()
	version, err := cp.StoredAPIVersion(ctx, controlplane.EtcdKey(appv1.GroupName, "apps", app.Namespace, app.Name))
	if err != nil {
		t.Fatal(err)
	}
	return version
}

// waitStoredAt waits until new Apps are stored at version: the API server
// reloads a CRD's storage a moment after the CRD changes, as it does
// before an upgraded manager starts. It writes and deletes a probe App in ns.
func waitStoredAt(t *testing.T, client versioned.Interface, ns, version string) {
	t.Helper()
	probe := types.NamespacedName{Namespace: ns, Name: "probe"}
	want := appv1.GroupName + "/" + version
	framework.Eventually(t, time.Minute, "a new App to be stored as "+want, func(ctx context.Context) (bool, error) {
		_ = client.AppV1().Apps(ns).Delete(ctx, probe.Name, metav1.DeleteOptions{})
		app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: probe.Name}, Spec: appv1.AppSpec{Image: "nginx:1.27"}}
		if _, err := client.AppV1().Apps(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
			return false, err
		}
		if got := storedAPIVersion(ctx, t, probe); got != want {
			return false, fmt.Errorf("stored as %q", got)
		}
		return true, nil
	})
	if err := client.AppV1().Apps(ns).Delete(context.Background(), probe.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// appState is what the migration must not change of an App, and the
// resourceVersion that shows a write.
type appState struct {
	v1beta1Spec, v1Spec string
	resourceVersion     string
}

// readApps reads every App named through both versions.
func readApps(ctx context.Context, t *testing.T, client versioned.Interface, names []types.NamespacedName) map[types.NamespacedName]appState {
	t.Helper()
	states := map[types.NamespacedName]appState{}
	for _, n := range names {
		old, err := client.AppV1beta1().Apps(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading App %s as v1beta1: %v", n, err)
		}
		cur, err := client.AppV1().Apps(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading App %s as v1: %v", n, err)
		}
		states[n] = appState{v1beta1Spec: specJSON(t, old.Spec), v1Spec: specJSON(t, cur.Spec), resourceVersion: cur.ResourceVersion}
	}
	return states
}

func specJSON(t *testing.T, spec any) string {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// newOldApp is an App as a user of an earlier release wrote it, through
// v1beta1.
func newOldApp(name string, service, ingress bool) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", EnableService: service, EnableIngress: ingress},
	}
}
