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
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/test/e2e/framework"
	integration "github.com/ndsl/controller-manager/test/integration/framework"
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

// Issue 38 for Pipelines: with every manager pod gone, a Pipeline is
// created, read, listed, watched, updated and deleted through v1, the
// version it is stored at, each request answered at the first attempt,
// admitted by the API server's policies (a refusal in the webhook's words
// included). A v1beta1 request, which needs the conversion webhook, fails
// and says so.
func TestPipelinesAtV1WithTheManagerDown(t *testing.T) {
	if suite.InClusterManager() {
		stopInClusterManager(t)
	}
	ctx := context.Background()
	pipelines := cluster.Typed.PipelineV1().Pipelines()
	var p pipelinev1.Pipeline
	integration.LoadManifest(t, "samples/pipeline-v1.yaml", &p)
	p.Name = "outage-" + rand.String(5)
	onNodes := nodeMapping()
	for i := range p.Spec.Steps {
		for j, n := range p.Spec.Steps[i].NodeNames {
			p.Spec.Steps[i].NodeNames[j] = onNodes(n)
		}
		p.Spec.Steps[i].Image = workloadImage()
		p.Spec.Steps[i].Replicas = ptr.To[int32](1)
	}
	deletePipelineAtEnd(t, p.Name)
	created, err := pipelines.Create(ctx, &p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Pipeline %s at v1 with the manager down: %v", p.Name, err)
	}
	if _, err := pipelines.Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("getting Pipeline %s at v1: %v", p.Name, err)
	}
	list, err := pipelines.List(ctx, metav1.ListOptions{})
	if err != nil || !slices.ContainsFunc(list.Items, func(q pipelinev1.Pipeline) bool { return q.Name == p.Name }) {
		t.Errorf("listing Pipelines at v1: %v; want %s in the list", err, p.Name)
	}
	watchCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, err := pipelines.Watch(watchCtx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatalf("watching Pipelines at v1: %v", err)
	}
	defer w.Stop()

	// The policy refuses what the webhook refuses, in its words.
	bad := created.DeepCopy()
	bad.Spec.Namespace = metav1.NamespaceSystem
	if _, err := pipelines.Update(ctx, bad, metav1.UpdateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "namespace kube-system is not allowed for Pipelines") {
		t.Errorf("moving Pipeline %s to kube-system with the manager down: %v; want the policy's refusal", p.Name, err)
	}
	good := created.DeepCopy()
	good.Spec.Steps[0].Replicas = ptr.To[int32](0)
	if _, err := pipelines.Update(ctx, good, metav1.UpdateOptions{}); err != nil {
		t.Errorf("scaling Pipeline %s's first step to 0 at v1: %v", p.Name, err)
	}
	if err := pipelines.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting Pipeline %s at v1: %v", p.Name, err)
	}
	// The watch sees the update, then the deletion.
	sawUpdate := false
watching:
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended before the deletion")
			}
			got, isPipeline := e.Object.(*pipelinev1.Pipeline)
			if !isPipeline || got.Name != p.Name {
				continue
			}
			switch e.Type {
			case watch.Modified:
				sawUpdate = sawUpdate || ptr.Deref(got.Spec.Steps[0].Replicas, -1) == 0
			case watch.Deleted:
				if !sawUpdate {
					t.Error("the watch saw the deletion but not the update")
				}
				break watching
			}
		case <-watchCtx.Done():
			t.Fatalf("the watch saw no deletion in a minute (the update: %v)", sawUpdate)
		}
	}

	beta := &pipelinev1beta1.Pipeline{}
	integration.LoadManifest(t, "samples/pipeline-v1beta1.yaml", beta)
	beta.Name = p.Name + "-v1beta1"
	_, err = cluster.Typed.PipelineV1beta1().Pipelines().Create(ctx, beta, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook for distri-infer.ndsl.cn") {
		t.Errorf("creating a Pipeline through v1beta1 with the manager down: %v; want the conversion webhook's error", err)
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
