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

package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	shards "github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Two replicas with --shards=2 split the App and Ingress controllers into
// app-0-of-2, app-1-of-2, ingress-0-of-2 and ingress-1-of-2, two each; each unit writes only in
// the namespaces of its shard, and every App and annotated Service
// converges. When one replica stops, the other leads every unit and
// converges Apps of either shard. On both API server paths.
func TestShardedManagers(t *testing.T) {
	requireSetup(t)
	for _, tc := range []struct {
		name string
		cp   *controlplane.ControlPlane
	}{{"client", cp}, {"server", gated}} {
		t.Run(tc.name, func(t *testing.T) { testShardedManagers(t, tc.cp) })
	}
}

func testShardedManagers(t *testing.T, cp *controlplane.ControlPlane) {
	crd, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	leaseNS := framework.CreateNamespace(t, cp.Client)
	// Namespaces of each shard, two each.
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	byShard := map[int][]string{}
	for len(byShard[0]) < 2 || len(byShard[1]) < 2 {
		ns := fmt.Sprintf("s%08x-apps", r.Uint32())
		i := shardOf(ns, 2)
		if len(byShard[i]) < 2 {
			createNamespace(t, cp.Client, ns)
			byShard[i] = append(byShard[i], ns)
		}
	}
	sharded := shardedOptions(leaseNS, appcontroller.ControllerName, ingress.ControllerName)
	replicas := map[string]*framework.Manager{
		"a": framework.StartManager(t, cp.Config, sharded),
		"b": framework.StartManager(t, cp.Config, sharded),
	}
	var ledBy map[string]string
	framework.Eventually(t, 60*time.Second, "the four units led, two by each replica", func(context.Context) (bool, error) {
		ledBy = map[string]string{}
		for name, m := range replicas {
			for _, c := range debug(t, m).Controllers {
				if c.Leading {
					if other, dup := ledBy[c.Name]; dup {
						return false, fmt.Errorf("%s led by both %s and %s", c.Name, other, name)
					}
					ledBy[c.Name] = name
				}
			}
		}
		per := map[string]int{}
		for _, r := range ledBy {
			per[r]++
		}
		return len(ledBy) == 4 && per["a"] == 2 && per["b"] == 2, nil
	})
	t.Logf("led: %v; namespaces by shard: %v", ledBy, byShard)

	for _, nss := range byShard {
		for _, ns := range nss {
			createApp(t, crd, ns, "web")
			createAnnotatedService(t, cp.Client, ns, "site")
		}
	}
	for _, nss := range byShard {
		for _, ns := range nss {
			waitDeployment(t, cp.Client, ns, "web")
			framework.Eventually(t, 60*time.Second, "the Ingress of Service "+ns+"/site", func(ctx context.Context) (bool, error) {
				_, err := cp.Client.NetworkingV1().Ingresses(ns).Get(ctx, "site", metav1.GetOptions{})
				return err == nil, nil
			})
		}
	}
	// Each unit wrote only in the namespaces of its shard.
	units := 0
	for name, m := range replicas {
		for client, reqs := range m.Writes.ByClient() {
			controllerName, index, ok := strings.Cut(client, "-")
			if !ok || (controllerName != appcontroller.ControllerName && controllerName != ingress.ControllerName) {
				continue
			}
			units++
			for req := range reqs {
				if ns := namespaceOf(req); strings.HasSuffix(ns, "-apps") && fmt.Sprintf("%d-of-2", shardOf(ns, 2)) != index {
					t.Errorf("unit %s on replica %s wrote %s, in shard %d", client, name, req, shardOf(ns, 2))
				}
			}
		}
	}
	if units != 4 {
		t.Errorf("%d units wrote, want the four", units)
	}

	// The leader of app-0-of-2 stops: the other leads both shards.
	stopped := ledBy["app-0-of-2"]
	if err := replicas[stopped].Stop(); err != nil {
		t.Fatalf("stopping %s: %v", stopped, err)
	}
	delete(replicas, stopped)
	for _, m := range replicas {
		framework.Eventually(t, 30*time.Second, "the other replica to lead every unit", func(context.Context) (bool, error) {
			led := 0
			for _, c := range debug(t, m).Controllers {
				if c.Leading {
					led++
				}
			}
			return led == 4, nil
		})
	}
	for _, nss := range byShard {
		createApp(t, crd, nss[0], "after")
		waitDeployment(t, cp.Client, nss[0], "after")
	}
}

// shardedOptions runs the controllers named with a Lease per controller,
// split in two shards, and a short lease.
func shardedOptions(leaseNS string, controllers ...string) func(*options.Options) {
	return func(o *options.Options) {
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceNamespace = leaseNS
		o.LeaderElection.ResourceName = "sharded"
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 4 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 2 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: 500 * time.Millisecond}
		o.HA.PerController = true
		o.HA.Shards = 2
		o.Generic.Controllers = controllers
	}
}

// shardOf is the shard of n that holds namespace ns's objects.
func shardOf(ns string, n int) int {
	for i := range n {
		if s, _ := shards.New(i, n); s.ContainsNamespace(ns) {
			return i
		}
	}
	return -1
}

// shardOfUID is the shard of n that holds the object of uid.
func shardOfUID(uid string, n int) int {
	for i := range n {
		if s, _ := shards.New(i, n); s.ContainsUID(uid) {
			return i
		}
	}
	return -1
}

// namespaceOf is the namespace in a "METHOD /path" of a write.
func namespaceOf(req string) string {
	_, rest, ok := strings.Cut(req, "/namespaces/")
	if !ok {
		return ""
	}
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}

func createNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func createAnnotatedService(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"ingress/http": "true"}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createApp(t *testing.T, crd versioned.Interface, ns, name string) {
	t.Helper()
	a := &appv1beta1.App{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appv1beta1.AppSpec{Image: "nginx:1.27"}}
	if _, err := crd.AppV1beta1().Apps(ns).Create(context.Background(), a, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitDeployment(t *testing.T, client kubernetes.Interface, ns, app string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, "the Deployment of App "+ns+"/"+app, func(ctx context.Context) (bool, error) {
		list, err := client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range list.Items {
			for _, ref := range d.OwnerReferences {
				if ref.Kind == "App" && ref.Name == app {
					return true, nil
				}
			}
		}
		return false, nil
	})
}

func debug(t *testing.T, m *framework.Manager) app.DebugStatus {
	t.Helper()
	code, body, err := m.Get("/debug/controllers")
	if err != nil || code != 200 {
		t.Fatalf("GET /debug/controllers: %d %v", code, err)
	}
	var d app.DebugStatus
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// Two replicas with --shards=2 split the Pipeline controller by the
// Pipelines' uids: each Pipeline's children and status are written by the
// unit of its shard alone. On both API server paths.
func TestShardedPipelines(t *testing.T) {
	requireSetup(t)
	for _, tc := range []struct {
		name string
		cp   *controlplane.ControlPlane
	}{{"client", cp}, {"server", gated}} {
		t.Run(tc.name, func(t *testing.T) { testShardedPipelines(t, tc.cp) })
	}
}

func testShardedPipelines(t *testing.T, cp *controlplane.ControlPlane) {
	crd, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	leaseNS := framework.CreateNamespace(t, cp.Client)
	childNS := framework.CreateNamespace(t, cp.Client)
	sharded := func(o *options.Options) {
		shardedOptions(leaseNS, pipeline.ControllerName)(o)
		o.Pipeline.AllowedNamespaces = []string{pipeline.AnyNamespace}
	}
	replicas := map[string]*framework.Manager{
		"a": framework.StartManager(t, cp.Config, sharded),
		"b": framework.StartManager(t, cp.Config, sharded),
	}
	framework.Eventually(t, 60*time.Second, "pipeline-0-of-2 and pipeline-1-of-2 led by one replica each", func(context.Context) (bool, error) {
		led := map[string]string{}
		for name, m := range replicas {
			for _, c := range debug(t, m).Controllers {
				if c.Leading {
					led[c.Name] = name
				}
			}
		}
		return len(led) == 2 && led["pipeline-0-of-2"] != led["pipeline-1-of-2"], nil
	})

	// Pipelines until each shard has two.
	shardOfPipeline := map[string]int{}
	count := map[int]int{}
	for i := 0; count[0] < 2 || count[1] < 2; i++ {
		p := &pipelinev1beta1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sharded-%s-%d", childNS, i)},
			Spec: pipelinev1beta1.PipelineSpec{Namespace: childNS,
				Steps: []pipelinev1beta1.PipelineStep{{Model: "m", Image: "nginx:latest", Location: "node-1"}},
				ModelStorage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeNFS,
					CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"}}}}
		created, err := crd.PipelineV1beta1().Pipelines().Create(context.Background(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = crd.PipelineV1beta1().Pipelines().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
		})
		i := shardOfUID(string(created.UID), 2)
		shardOfPipeline[created.Name] = i
		count[i]++
	}
	framework.Eventually(t, 60*time.Second, "every Pipeline's status written", func(ctx context.Context) (bool, error) {
		for name := range shardOfPipeline {
			p, err := crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.ObservedGeneration == 0 {
				return false, err
			}
		}
		return true, nil
	})
	units := 0
	for name, m := range replicas {
		for client, reqs := range m.Writes.ByClient() {
			controllerName, index, ok := strings.Cut(client, "-")
			if !ok || controllerName != pipeline.ControllerName {
				continue
			}
			units++
			for req := range reqs {
				_, rest, ok := strings.Cut(req, "/pipelines/")
				if !ok {
					continue
				}
				pname, _, _ := strings.Cut(rest, "/")
				if i, ours := shardOfPipeline[pname]; ours && fmt.Sprintf("%d-of-2", i) != index {
					t.Errorf("unit %s on replica %s wrote %s, of a Pipeline in shard %d", client, name, req, i)
				}
			}
		}
	}
	if units != 2 {
		t.Errorf("%d units wrote, want pipeline-0-of-2 and pipeline-1-of-2", units)
	}
}
