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

package app

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
	"github.com/ndsl/controller-manager/pkg/storageversion"
)

// The migration lists the Apps of every namespace and writes each back
// through the status subresource, the one write the controller's RBAC
// allows on Apps.
func TestRewriteAppsWritesEveryAppThroughStatus(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewSimpleClientset(
		&appv1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: appv1.AppSpec{Image: "nginx"}},
		&appv1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "api"}, Spec: appv1.AppSpec{Image: "nginx"}},
	)
	m := &storageMigration{apps: client}
	done, err := m.rewriteApps(ctx)
	if err != nil || done != (storageversion.Rewritten{Written: 2}) {
		t.Fatalf("rewriteApps = %+v, %v; want 2 written", done, err)
	}
	var requests []string
	for _, a := range client.Actions() {
		requests = append(requests, a.GetVerb()+" "+a.GetNamespace()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	want := []string{"list  apps/", "update a apps/status", "update b apps/status"}
	if !slices.Equal(requests, want) {
		t.Errorf("requests %q, want %q", requests, want)
	}
}
