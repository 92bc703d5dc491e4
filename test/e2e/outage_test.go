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

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// outageCreates is how many v1 creates the load sends with no manager up.
const outageCreates = 100

// Issue 38: with every manager pod gone, Apps are still served through v1,
// the version they are stored at: a user's steady load of v1 creates, lists
// and deletes fails no request, admitted by the API server's policies.
// A v1beta1 request, which needs the conversion webhook, fails and says so.
func TestAppsAtV1WithTheManagerDown(t *testing.T) {
	if suite.InClusterManager() {
		stopInClusterManager(t)
	} // Else no manager process runs between tests: the webhooks have no backend.
	ns := newNamespace(t)
	load := startRequestLoadAt(t, ns, appv1.SchemeGroupVersion.Version)
	load.conversionFailuresExpected = true
	load.waitStarted(t)
	eventually(t, 2*time.Minute, "the load to send its creates", func(context.Context) (bool, error) {
		load.mu.Lock()
		defer load.mu.Unlock()
		return load.sent[loadCreate] >= outageCreates, nil
	})
	load.check(t, "the manager's outage")

	_, err := cluster.Typed.AppV1beta1().Apps(ns).Create(context.Background(), newApp("through-v1beta1", 0, false), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook for ingress.example.com") {
		t.Errorf("creating an App through v1beta1 with the manager down: %v; want the conversion webhook's error", err)
	}
}

// stopInClusterManager scales the manager's Deployment to zero until the
// test ends, then back to its replicas, and waits until the API server
// converts v1beta1 again.
func stopInClusterManager(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	d, err := cluster.Kube.AppsV1().Deployments(framework.ManagerNamespace).Get(ctx, framework.ManagerDeploymentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	if err := cluster.ScaleInClusterManager(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.ScaleInClusterManager(ctx, replicas); err != nil {
			t.Fatal(err)
		}
		waitManagerReady(t, 3*time.Minute)
		if err := cluster.WaitAppAdmission(ctx, "v1beta1"); err != nil {
			t.Fatal(err)
		}
	})
	// Not even a terminating one, which serves the webhooks as a lame duck.
	eventually(t, time.Minute, "no manager pod left", func(ctx context.Context) (bool, error) {
		pods, err := cluster.Kube.CoreV1().Pods(framework.ManagerNamespace).List(ctx, metav1.ListOptions{LabelSelector: managerSelector})
		return err == nil && len(pods.Items) == 0, err
	})
}
