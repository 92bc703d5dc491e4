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
	"k8s.io/apimachinery/pkg/types"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	oldApps         = 25
	migrateDeadline = 2 * time.Minute
	crdPath         = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + appcontroller.CRDName
)

// After an upgrade that made v1 the Apps' storage version, the manager
// that leads rewrites every App stored at v1beta1 at v1, then sets the
// CRD's status.storedVersions to [v1], with nothing but the shipped RBAC.
// With --shards=2 the unit of shard 0 alone does it, and lists the Apps of
// both shards. The next leadership term reads the CRD once and writes
// nothing.
func TestTheLeaderMigratesStoredAppsOnce(t *testing.T) {
	ctx := context.Background()
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config)
	client := versioned.NewForConfigOrDie(cp.Config)

	// The CRD as an earlier release had it, and Apps written then.
	if err := controlplane.InstallCRDs(ctx, cp.Config, crdsAt(t, "v1beta1")); err != nil {
		t.Fatal(err)
	}
	home := framework.CreateNamespace(t, cp.Client)
	namespaces := namespacesInBothShards(t)
	type exposure struct{ service, ingress bool }
	want := map[types.NamespacedName]exposure{}
	for i := range oldApps {
		ns := namespaces[i%len(namespaces)]
		e := exposure{service: i%3 != 0, ingress: i%3 == 2}
		if _, err := client.AppV1beta1().Apps(ns).Create(ctx, newOldApp(fmt.Sprintf("old-%d", i), e.service, e.ingress), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("old-%d", i)}] = e
	}
	viaV1 := &appv1.App{ObjectMeta: metav1.ObjectMeta{Name: "via-v1"}, Spec: appv1.AppSpec{Image: "nginx:1.27", Exposure: appv1.ExposureIngress}}
	if _, err := client.AppV1().Apps(namespaces[0]).Create(ctx, viaV1, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want[types.NamespacedName{Namespace: namespaces[0], Name: viaV1.Name}] = exposure{service: true, ingress: true}
	var names []types.NamespacedName
	for n := range want {
		names = append(names, n)
	}
	// Their status written, as a manager of that release left it: the
	// controller has nothing to write to them after the upgrade, so what
	// moves them is the migration alone.
	converge(t, client, names)
	for _, n := range names {
		if got := storedAPIVersion(ctx, t, n); got != "ingress.example.com/v1beta1" {
			t.Fatalf("App %s is stored as %q before the upgrade, want ingress.example.com/v1beta1", n, got)
		}
	}
	before := readApps(ctx, t, client, names)

	// The upgrade: the CRD first, the manager once the API server stores v1.
	upgradeCRD(ctx, t, crds, appcontroller.CRDName)
	waitStoredAt(t, client, home, "v1")
	if got := storedVersions(ctx, t, crds, appcontroller.CRDName); !slices.Equal(got, []string{"v1beta1", "v1"}) {
		t.Fatalf("status.storedVersions = %v after the upgrade, want [v1beta1 v1]", got)
	}
	cfg := framework.ServiceAccountWithClusterRoles(t, cp, home, "rbac/controllers/app.yaml", "rbac/leader-election.yaml")
	started := time.Now()
	first := framework.StartManager(t, cfg, leaderElection(home, "migrate-sharded", 2))
	framework.Eventually(t, migrateDeadline, "status.storedVersions to be [v1]", func(ctx context.Context) (bool, error) {
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, appcontroller.CRDName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := crd.Status.StoredVersions; !slices.Equal(got, []string{"v1"}) {
			return false, fmt.Errorf("status.storedVersions %v", got)
		}
		return true, nil
	})
	t.Logf("%d Apps migrated and storedVersions set %s after the manager started", len(names), time.Since(started).Round(time.Millisecond))

	for _, n := range names {
		if got := storedAPIVersion(ctx, t, n); got != "ingress.example.com/v1" {
			t.Errorf("App %s is stored as %q after the migration, want ingress.example.com/v1", n, got)
		}
	}
	after := readApps(ctx, t, client, names)
	for _, n := range names {
		if was, now := before[n], after[n]; was.v1beta1Spec != now.v1beta1Spec || was.v1Spec != now.v1Spec {
			t.Errorf("App %s changed in the migration: v1beta1 spec %s → %s, v1 spec %s → %s", n, was.v1beta1Spec, now.v1beta1Spec, was.v1Spec, now.v1Spec)
		}
		old, err := client.AppV1beta1().Apps(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := (exposure{old.Spec.EnableService, old.Spec.EnableIngress}); got != want[n] {
			t.Errorf("App %s reads as enable_service %t, enable_ingress %t; created with %+v", n, got.service, got.ingress, want[n])
		}
	}
	byClient := first.Writes.ByClient()
	for client, requests := range byClient {
		statuses := 0
		for request, count := range requests {
			if strings.HasSuffix(request, crdPath+"/status") && client != "app-0-of-2" {
				t.Errorf("%s wrote the CRD's status (%d× %s): only the unit of shard 0 migrates", client, count, request)
			}
			if strings.HasPrefix(request, "PUT /apis/ingress.example.com/") && strings.HasSuffix(request, "/status") {
				statuses += count
			}
		}
		t.Logf("%s: %d App status writes", client, statuses)
	}
	shard1, _ := shard.New(1, 2)
	for _, n := range names {
		request := fmt.Sprintf("PUT /apis/ingress.example.com/v1/namespaces/%s/apps/%s/status", n.Namespace, n.Name)
		if shard1.ContainsNamespace(n.Namespace) && byClient["app-0-of-2"][request] == 0 {
			t.Errorf("App %s, of shard 1, was not rewritten by the unit of shard 0", n)
		}
	}

	// The controller's own status writes done, what a second rewrite costs:
	// the API server stores an App again only if its bytes change.
	framework.Eventually(t, migrateDeadline, "the first manager's queues to drain", func(context.Context) (bool, error) {
		return first.QueuesEmpty()
	})
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	rewriteAgain(ctx, t, client, len(names))

	// A new leadership term, with one Lease: one GET of the CRD, no write.
	settled := readApps(ctx, t, client, names)
	crdVersion := crdResourceVersion(ctx, t, crds, appcontroller.CRDName)
	reconciles := framework.ReconcileCount(t, appcontroller.ControllerName)
	second := framework.StartManager(t, cfg, leaderElection(home, "migrate-single", 1))
	framework.Eventually(t, migrateDeadline, "the next leader to read the CRD and reconcile every App", func(context.Context) (bool, error) {
		done := framework.ReconcileCount(t, appcontroller.ControllerName)-reconciles >= float64(len(names))
		empty, err := second.QueuesEmpty()
		return done && empty && second.Writes.Reads()[crdPath] > 0, err
	})
	if n := second.Writes.Reads()[crdPath]; n != 1 {
		t.Errorf("the next leader read the CRD %d times, want once", n)
	}
	if writes := second.Writes.Summary(); strings.Contains(writes, "/status") {
		t.Errorf("the next leader wrote a status:\n%s", writes)
	}
	if got := crdResourceVersion(ctx, t, crds, appcontroller.CRDName); got != crdVersion {
		t.Errorf("the CRD was written in the next term: resourceVersion %s → %s", crdVersion, got)
	}
	for n, now := range readApps(ctx, t, client, names) {
		if was := settled[n]; now.resourceVersion != was.resourceVersion {
			t.Errorf("App %s was written in the next term: resourceVersion %s → %s", n, was.resourceVersion, now.resourceVersion)
		}
	}
}

// converge runs the manager, the App controller alone, until it has
// written every App's status, and stops it.
func converge(t *testing.T, client versioned.Interface, names []types.NamespacedName) {
	t.Helper()
	m := framework.StartManager(t, cp.Config, func(o *options.Options) { o.Generic.Controllers = []string{appcontroller.ControllerName} })
	framework.Eventually(t, migrateDeadline, "every App's status", func(ctx context.Context) (bool, error) {
		for _, n := range names {
			app, err := client.AppV1().Apps(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || app.Status.ObservedGeneration != app.Generation {
				return false, err
			}
		}
		return m.QueuesEmpty()
	})
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
}

// rewriteAgain writes every App back as the migration does, now that each
// is stored at v1, and checks that the API server stored none again.
func rewriteAgain(ctx context.Context, t *testing.T, client versioned.Interface, n int) {
	t.Helper()
	list, err := client.AppV1().Apps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != n {
		t.Fatalf("%d Apps after the migration, want %d", len(list.Items), n)
	}
	for i := range list.Items {
		app := &list.Items[i]
		updated, err := client.AppV1().Apps(app.Namespace).UpdateStatus(ctx, app, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		if err != nil {
			t.Fatal(err)
		}
		if updated.ResourceVersion != app.ResourceVersion {
			t.Errorf("App %s/%s rewritten at v1 was stored again: resourceVersion %s → %s", app.Namespace, app.Name, app.ResourceVersion, updated.ResourceVersion)
		}
	}
}

// leaderElection runs the App controller alone under short Leases named
// after lease in ns: one, or one per shard of shards.
func leaderElection(ns, lease string, shards int) func(*options.Options) {
	return func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName}
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = ns
		o.LeaderElection.ResourceName = lease
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 3 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 500 * time.Millisecond}
		o.HA.PerController = shards > 1
		o.HA.Shards = shards
	}
}

// namespacesInBothShards creates namespaces until each shard of
// --shards=2 holds one.
func namespacesInBothShards(t *testing.T) []string {
	t.Helper()
	shards, err := shard.All(2)
	if err != nil {
		t.Fatal(err)
	}
	var namespaces []string
	covered := map[int]bool{}
	for len(namespaces) < 2 || len(covered) < len(shards) {
		if len(namespaces) == 16 {
			t.Fatalf("16 namespaces, all in shard %v", covered)
		}
		ns := framework.CreateNamespace(t, cp.Client)
		for _, s := range shards {
			if s.ContainsNamespace(ns) {
				covered[s.Index] = true
			}
		}
		namespaces = append(namespaces, ns)
	}
	return namespaces
}

func storedVersions(ctx context.Context, t *testing.T, crds apiextensionsclient.Interface, name string) []string {
	t.Helper()
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd.Status.StoredVersions
}

func crdResourceVersion(ctx context.Context, t *testing.T, crds apiextensionsclient.Interface, name string) string {
	t.Helper()
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd.ResourceVersion
}
