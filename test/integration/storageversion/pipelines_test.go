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
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	oldPipelines    = 24
	pipelineCRDPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + pipeline.CRDName
)

// After an upgrade that made v1 the Pipelines' storage version, the
// manager that leads rewrites every Pipeline stored at v1beta1 at v1, then
// sets the CRD's status.storedVersions to [v1], with nothing but the
// shipped RBAC; the Pipelines read the same through both versions, the
// design notes' shapes that v1 cannot say included, and their children
// keep their specs, only their owner references naming v1. With
// --shards=2 the unit of shard 0 alone does it. The next leadership term
// reads the CRD once and writes nothing.
func TestTheLeaderMigratesStoredPipelinesOnce(t *testing.T) {
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config)
	client := versioned.NewForConfigOrDie(cp.Config)

	// The CRD as an earlier release had it, and Pipelines written then.
	if err := controlplane.InstallCRDs(ctx, cp.Config, crdsAt(t, "v1beta1")); err != nil {
		t.Fatal(err)
	}
	if got := storedVersions(ctx, t, crds, pipeline.CRDName); !slices.Equal(got, []string{"v1beta1"}) {
		t.Fatalf("status.storedVersions = %v before the upgrade, want [v1beta1]", got)
	}
	home := framework.CreateNamespace(t, cp.Client)
	var names []string
	for i := range oldPipelines {
		p := newOldPipeline(fmt.Sprintf("old-%d", i), home, i)
		if _, err := client.PipelineV1beta1().Pipelines().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	viaV1 := &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "via-v1"},
		Spec: pipelinev1.PipelineSpec{
			Namespace:    home,
			Steps:        []pipelinev1.PipelineStep{{Model: "m", Image: "nginx:1.27", NodeNames: []string{"node-a"}}},
			ModelStorage: pipelinev1.ModelStorage{NFS: &pipelinev1.NFSStorage{Server: "192.0.2.10", Path: "/exports"}},
		},
	}
	if _, err := client.PipelineV1().Pipelines().Create(ctx, viaV1, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names = append(names, viaV1.Name)
	t.Cleanup(func() {
		for _, name := range names {
			_ = client.PipelineV1().Pipelines().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	// Their children and status written, as a manager of that release
	// left them: what moves the Pipelines afterwards is the migration.
	convergePipelines(t, client, home, names)
	ownedAtV1beta1(ctx, t, home)
	for _, name := range names {
		if got := storedPipelineVersion(ctx, t, name); got != "distri-infer.ndsl.cn/v1beta1" {
			t.Fatalf("Pipeline %s is stored as %q before the upgrade, want distri-infer.ndsl.cn/v1beta1", name, got)
		}
	}
	before := readPipelines(ctx, t, client, names)
	childrenBefore := readChildren(ctx, t, home)

	// The upgrade: the CRD first, the manager once the API server stores v1.
	upgradeCRD(ctx, t, crds, pipeline.CRDName)
	waitPipelinesStoredAt(t, client, home, "v1")
	if got := storedVersions(ctx, t, crds, pipeline.CRDName); !slices.Equal(got, []string{"v1beta1", "v1"}) {
		t.Fatalf("status.storedVersions = %v after the upgrade, want [v1beta1 v1]", got)
	}
	cfg := framework.ServiceAccountWithClusterRoles(t, cp, home, "rbac/controllers/pipeline.yaml", "rbac/leader-election.yaml")
	started := time.Now()
	first := framework.StartManager(t, cfg, pipelineLeaderElection(home, "migrate-pipelines-sharded", 2))
	framework.Eventually(t, migrateDeadline, "status.storedVersions to be [v1]", func(ctx context.Context) (bool, error) {
		if got := storedVersions(ctx, t, crds, pipeline.CRDName); !slices.Equal(got, []string{"v1"}) {
			return false, fmt.Errorf("status.storedVersions %v", got)
		}
		return true, nil
	})
	t.Logf("%d Pipelines migrated and storedVersions set %s after the manager started", len(names), time.Since(started).Round(time.Millisecond))

	for _, name := range names {
		if got := storedPipelineVersion(ctx, t, name); got != "distri-infer.ndsl.cn/v1" {
			t.Errorf("Pipeline %s is stored as %q after the migration, want distri-infer.ndsl.cn/v1", name, got)
		}
	}
	after := readPipelines(ctx, t, client, names)
	for _, name := range names {
		if was, now := before[name], after[name]; was.v1beta1Spec != now.v1beta1Spec || was.v1Spec != now.v1Spec {
			t.Errorf("Pipeline %s changed in the migration: v1beta1 spec %s → %s, v1 spec %s → %s", name, was.v1beta1Spec, now.v1beta1Spec, was.v1Spec, now.v1Spec)
		}
	}
	byClient := first.Writes.ByClient()
	for client, requests := range byClient {
		statuses := 0
		for request, count := range requests {
			if strings.HasSuffix(request, pipelineCRDPath+"/status") && client != "pipeline-0-of-2" {
				t.Errorf("%s wrote the CRD's status (%d× %s): only the unit of shard 0 migrates", client, count, request)
			}
			if strings.HasPrefix(request, "PUT /apis/distri-infer.ndsl.cn/") && strings.HasSuffix(request, "/status") {
				statuses += count
			}
		}
		t.Logf("%s: %d Pipeline status writes", client, statuses)
	}
	shard1, _ := shard.New(1, 2)
	inShard1 := shard1.Keeps(shard.UID)
	rewritten1 := 0
	for _, name := range names {
		p, err := client.PipelineV1().Pipelines().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !inShard1(p) {
			continue
		}
		rewritten1++
		if byClient["pipeline-0-of-2"]["PUT /apis/distri-infer.ndsl.cn/v1/pipelines/"+name+"/status"] == 0 {
			t.Errorf("Pipeline %s, of shard 1, was not rewritten by the unit of shard 0", name)
		}
	}
	t.Logf("%d of %d Pipelines in shard 1", rewritten1, len(names))

	// The controller's own writes done (each child's owner reference
	// moved to v1), the children are the same objects with the same specs.
	framework.Eventually(t, migrateDeadline, "the first manager's queues to drain", func(context.Context) (bool, error) {
		return first.QueuesEmpty()
	})
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	childrenAfter := readChildren(ctx, t, home)
	for _, d := range diffChildren(childrenBefore, childrenAfter) {
		t.Errorf("the upgrade changed a child: %s", d)
	}
	rewritePipelinesAgain(ctx, t, client, len(names))

	// A new leadership term, with one Lease: one GET of the CRD, no write.
	settled := readPipelines(ctx, t, client, names)
	crdVersion := crdResourceVersion(ctx, t, crds, pipeline.CRDName)
	reconciles := framework.ReconcileCount(t, pipeline.ControllerName)
	second := framework.StartManager(t, cfg, pipelineLeaderElection(home, "migrate-pipelines-single", 1))
	framework.Eventually(t, migrateDeadline, "the next leader to read the CRD and reconcile every Pipeline", func(context.Context) (bool, error) {
		done := framework.ReconcileCount(t, pipeline.ControllerName)-reconciles >= float64(len(names))
		empty, err := second.QueuesEmpty()
		return done && empty && second.Writes.Reads()[pipelineCRDPath] > 0, err
	})
	if n := second.Writes.Reads()[pipelineCRDPath]; n != 1 {
		t.Errorf("the next leader read the CRD %d times, want once", n)
	}
	for request, n := range second.Writes.ByRequest() {
		// Its Lease and the leader election's Event are all it writes.
		if !strings.Contains(request, "/leases") && !strings.HasSuffix(request, "/events") {
			t.Errorf("the next leader wrote %d× %s", n, request)
		}
	}
	if got := crdResourceVersion(ctx, t, crds, pipeline.CRDName); got != crdVersion {
		t.Errorf("the CRD was written in the next term: resourceVersion %s → %s", crdVersion, got)
	}
	for name, now := range readPipelines(ctx, t, client, names) {
		if was := settled[name]; now.resourceVersion != was.resourceVersion {
			t.Errorf("Pipeline %s was written in the next term: resourceVersion %s → %s", name, was.resourceVersion, now.resourceVersion)
		}
	}
}

// newOldPipeline is the i-th Pipeline as a user of an earlier release wrote
// it through v1beta1, in one of the design notes' shapes, some of which v1
// cannot say exactly: the type inside csiParameter, a key the controller
// ignores, location beside locations, a stray spec.status.
func newOldPipeline(name, namespace string, i int) *pipelinev1beta1.Pipeline {
	p := &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pipelinev1beta1.PipelineSpec{
			Namespace: namespace,
			Steps: []pipelinev1beta1.PipelineStep{
				{Model: "detect", Image: "nginx:1.27", Location: "node-a", Replicas: ptr.To[int32](1), Args: map[string]string{"listenPort": "9080"}},
				{Model: "classify", Image: "nginx:1.27"},
			},
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "192.0.2.10", "share": "/exports"},
			},
		},
	}
	switch i % 4 {
	case 0: // as the design notes write it
		p.Spec.ModelStorage.Type = ""
		p.Spec.ModelStorage.CSIParameter["type"] = "nfs"
	case 1:
		p.Spec.ModelStorage.CSIParameter["mountOptions"] = "nfsvers=4.1"
	case 2:
		p.Spec.Steps[1].Location, p.Spec.Steps[1].Locations = "node-b", []string{"node-a", "node-b"}
	case 3:
		p.Spec.Status = &runtime.RawExtension{Raw: []byte(`{"phase":"Running"}`)}
	}
	return p
}

// convergePipelines runs the manager, the Pipeline controller alone with
// ns for the children, until it has written every Pipeline's status, and
// stops it.
func convergePipelines(t *testing.T, client versioned.Interface, ns string, names []string) {
	t.Helper()
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{pipeline.ControllerName}
		o.Pipeline.DefaultNamespace = ns
	})
	framework.Eventually(t, migrateDeadline, "every Pipeline's status", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			p, err := client.PipelineV1().Pipelines().Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.ObservedGeneration != p.Generation {
				return false, err
			}
		}
		return m.QueuesEmpty()
	})
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
}

// rewritePipelinesAgain writes every Pipeline back as the migration does,
// now that each is stored at v1, and checks that the API server stored
// none again.
func rewritePipelinesAgain(ctx context.Context, t *testing.T, client versioned.Interface, n int) {
	t.Helper()
	list, err := client.PipelineV1().Pipelines().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		t.Fatalf("%d Pipelines after the migration, want %d", len(list.Items), n)
	}
	for i := range list.Items {
		p := &list.Items[i]
		updated, err := client.PipelineV1().Pipelines().UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		if err != nil {
			t.Fatal(err)
		}
		if updated.ResourceVersion != p.ResourceVersion {
			t.Errorf("Pipeline %s rewritten at v1 was stored again: resourceVersion %s → %s", p.Name, p.ResourceVersion, updated.ResourceVersion)
		}
	}
}

// pipelineLeaderElection is leaderElection for the Pipeline controller
// alone, its children in ns.
func pipelineLeaderElection(ns, lease string, shards int) func(*options.Options) {
	elect := leaderElection(ns, lease, shards)
	return func(o *options.Options) {
		elect(o)
		o.Generic.Controllers = []string{pipeline.ControllerName}
		o.Pipeline.DefaultNamespace = ns
	}
}
