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

package coexistence

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	appconversion "github.com/ndsl/controller-manager/apis/app/conversion"
	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// TestV1ReadsAreNeverSilentlyWrong reads an App through v1 in a cluster
// where the CRDs were installed as `make install` does (manifests/crd) and
// no conversion webhook runs: either v1 is not served, or what it serves is
// the App converted to v1.
func TestV1ReadsAreNeverSilentlyWrong(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	stored := createApp(t, ns, newApp("versioned", ptr.To[int32](2), true))

	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: appv1.SchemeGroupVersion.Group, Version: appv1.SchemeGroupVersion.Version, Resource: "apps"}
	served, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), stored.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // v1 is not served: a client gets an error, not wrong data
	}
	if err != nil {
		t.Fatalf("reading the App through v1: %v", err)
	}
	var want appv1.App
	if err := appconversion.V1beta1ToV1(stored, &want); err != nil {
		t.Fatal(err)
	}
	var got appv1.App
	data, err := served.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("decoding the v1 App: %v", err)
	}
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		gotJSON, _ := json.Marshal(got.Spec)
		wantJSON, _ := json.Marshal(want.Spec)
		t.Errorf("v1 serves spec %s, want the App converted to v1: %s", gotJSON, wantJSON)
	}
}

// TestDeleteAllKeepsApps runs `kubectl delete all --all` in a namespace
// with an App: "all" means the built-in workloads, so the App stays (its
// children may go, and come back).
func TestDeleteAllKeepsApps(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	app := createApp(t, ns, newApp("kept", ptr.To[int32](1), true))
	deploymentOf(t, ns, app.UID)

	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", cp.KubeconfigPath, "-n", ns, "delete", "all", "--all", "--wait=false").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl delete all --all: %v\n%s", err, out)
	}
	got, err := getApp(context.Background(), t, ns, app.Name)
	if err != nil {
		t.Fatalf("App %s after `kubectl delete all --all`: %v; kubectl said:\n%s", app.Name, err, out)
	}
	if got.DeletionTimestamp != nil {
		t.Fatalf("App %s is being deleted after `kubectl delete all --all`; kubectl said:\n%s", app.Name, out)
	}
	// The manager puts back what kubectl deleted.
	deploymentOf(t, ns, app.UID)
}
