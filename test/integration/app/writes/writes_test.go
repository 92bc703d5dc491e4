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

package writes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const timeout = time.Minute

// Converging N new Apps costs at most 4 writes each (3 creates and 1 status
// update), no event and no read of a child from the API server;
// once converged, resyncs that reconcile every App again write nothing at
// all.
//
// Counted: every POST, PUT, PATCH and DELETE the manager sends, except the
// events it records (POST and PATCH of .../events), which are reported
// separately. The resync check counts everything, events included.
func TestWritesPerAppAndZeroWriteResync(t *testing.T) {
	const n = 20
	ctx := context.Background()
	ns, apps, m := startAppManager(t, func(o *options.Options) {
		o.Generic.MinResyncPeriod = time.Second // resync every 1-2 s
		o.App.IngressDomain = "apps.example.com"
	})
	before := m.Writes.ByRequest()

	for i := range n {
		app := &appv1beta1.App{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i)},
			Spec: appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2),
				EnableService: true, EnableIngress: true},
		}
		if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, timeout, "every App converged", func(ctx context.Context) (bool, error) {
		list, err := apps.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, a := range list.Items {
			degraded := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionDegraded)
			if a.Status.ObservedGeneration == a.Generation && a.Status.URL != "" &&
				degraded != nil && degraded.Status == metav1.ConditionFalse {
				done++
			}
		}
		return done == n, nil
	})
	managed := metav1.ListOptions{LabelSelector: controller.ManagedByLabel + "=" + controller.ManagedByValue}
	deployments, err := cp.Client.AppsV1().Deployments(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	services, err := cp.Client.CoreV1().Services(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	ingresses, err := cp.Client.NetworkingV1().Ingresses(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != n || len(services.Items) != n || len(ingresses.Items) != n {
		t.Fatalf("children: %d Deployments, %d Services, %d Ingresses; want %d of each",
			len(deployments.Items), len(services.Items), len(ingresses.Items), n)
	}
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) {
		return m.QueuesEmpty()
	})
	writes, events := 0, 0
	byKind := map[string]int{}
	for path, count := range m.Writes.ByRequest() {
		count -= before[path]
		byKind[kindOf(path)] += count
		if strings.HasSuffix(kindOf(path), " events") {
			events += count
		} else {
			writes += count
		}
	}
	t.Logf("converging %d Apps: %d writes (%.2f per App), plus %d event writes: %v",
		n, writes, float64(writes)/n, events, byKind)
	if writes > 4*n {
		t.Errorf("converging %d Apps made %d writes, more than 4 per App", n, writes)
	}
	if events != 0 {
		t.Errorf("converging %d new Apps recorded %d events, want none: their status says the children are there", n, events)
	}
	// Children are read from the caches: a missing one is created with no
	// read from the API server first.
	if reads := childReads(m.Writes.Reads(), ns); reads != 0 {
		t.Errorf("converging %d Apps read %d children from the API server, want 0: %v", n, reads, m.Writes.Reads())
	}

	// Every App reconciled at least twice more by resyncs: not one write.
	writesBefore := m.Writes.Total()
	reconcilesBefore := framework.ReconcileCount(t, appcontroller.ControllerName)
	framework.Eventually(t, timeout, "two rounds of resync", func(context.Context) (bool, error) {
		return framework.ReconcileCount(t, appcontroller.ControllerName)-reconcilesBefore >= 2*n, nil
	})
	if extra := m.Writes.Total() - writesBefore; extra != 0 {
		t.Fatalf("resyncs of converged Apps made %d write requests; all writes so far:\n%s", extra, m.Writes.Summary())
	}
}

// kindOf turns "PUT /apis/g/v/namespaces/ns/apps/a/status" into
// "PUT apps/status": the method, the resource and any subresource.
func kindOf(path string) string {
	method, path, _ := strings.Cut(path, " ")
	_, rest, ok := strings.Cut(path, "/namespaces/")
	if !ok {
		return method + " " + path
	}
	parts := strings.Split(rest, "/") // ns, resource[, name[, subresource]]
	kind := method + " " + parts[min(1, len(parts)-1)]
	if len(parts) > 3 {
		kind += "/" + parts[3]
	}
	return kind
}

// childReads counts the reads of one Deployment, Service or Ingress of
// namespace ns among reads (lists and watches are not).
func childReads(reads map[string]int, ns string) int {
	total := 0
	for path, n := range reads {
		_, rest, ok := strings.Cut(path, "/namespaces/"+ns+"/")
		parts := strings.Split(rest, "/") // resource, name[, subresource]
		if !ok || len(parts) < 2 {
			continue
		}
		switch parts[0] {
		case "deployments", "services", "ingresses":
			total += n
		}
	}
	return total
}
