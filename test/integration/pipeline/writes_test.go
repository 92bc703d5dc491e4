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

package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// writeCounts sorts the manager's writes, parsed from the write counter's
// summary lines ("3× POST /api/v1/...").
type writeCounts struct {
	children, status, events, other int
	// childConflicts are the child writes refused with 409, left out of
	// children: each is followed by one live read of the child (a claim
	// patch's retry, or a create's AlreadyExists).
	childConflicts int
	lines          []string
}

func countWrites(m *framework.Manager) writeCounts {
	var c writeCounts
	conflicts := m.Writes.Conflicts()
	for request, n := range m.Writes.ByRequest() {
		c.lines = append(c.lines, fmt.Sprintf("%d× %s (%d refused with 409)", n, request, conflicts[request]))
		// A write refused with 409 changed nothing, and its retry is
		// counted: on a loaded machine the volume controller's update of
		// a new claim can come between the claim's live GET and its patch.
		n -= conflicts[request]
		path := request[strings.Index(request, " ")+1:]
		if isChildWrite(path) {
			c.childConflicts += conflicts[request]
		}
		switch {
		case strings.HasSuffix(path, "/status"):
			c.status += n
		case strings.Contains(path, "/events"):
			c.events += n
		case isChildWrite(path):
			c.children += n
		default:
			c.other += n
		}
	}
	return c
}

// isChildWrite reports whether path is a child's collection (a create) or a
// child (an apply, creates included, or a delete).
func isChildWrite(path string) bool {
	for _, resource := range []string{"persistentvolumes", "persistentvolumeclaims", "deployments", "services"} {
		if strings.HasSuffix(path, "/"+resource) || strings.Contains(path, "/"+resource+"/") {
			return true
		}
	}
	return false
}

// childReads counts the reads of one child (not lists) among reads.
func childReads(reads map[string]int) int {
	total := 0
	for path, n := range reads {
		for _, resource := range []string{"persistentvolumes", "persistentvolumeclaims", "deployments", "services"} {
			if strings.Contains(path, "/"+resource+"/") {
				total += n
			}
		}
	}
	return total
}

func (c writeCounts) total() int { return c.children + c.status + c.events + c.other }

// New Pipelines cost exactly one create per child (2 + 2×steps) and two
// more writes of the claim, once its volume exists: naming the volume's
// UID (AnnotationVolumeUID) makes the binder bind them at once, and is the
// claim's first apply, which first moves its fields from the create to this
// manager's apply entry (a patch, after the only read of a child from the
// API server). Then one status write per change they observe while
// converging, none of them a no-op; once converged, resyncs every second
// write nothing.
func TestWritesPerNewPipelineAndZeroWriteResync(t *testing.T) {
	ctx := context.Background()
	e := setup(t, func(o *options.Options) {
		o.Generic.MinResyncPeriod = time.Second // resync every 1-2 s
	})
	ns := framework.CreateNamespace(t, e.kube) // exists: no namespace write
	if err := cp.CreateFakeNodes(ctx, "writes-node"); err != nil {
		t.Fatal(err)
	}
	const n, steps = 10, 2
	// Every effective status write shows as one MODIFIED event (the spec
	// does not change here); a write that changed nothing would not.
	watch, err := e.crd.PipelineV1beta1().Pipelines().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	var modified atomic.Int32
	go func() {
		for ev := range watch.ResultChan() {
			if p, ok := ev.Object.(*pipelinev1beta1.Pipeline); ok && ev.Type == apiwatch.Modified && strings.HasPrefix(p.Name, "writes-") {
				modified.Add(1)
			}
		}
	}()
	for i := range n {
		e.create(newPipeline(fmt.Sprintf("writes-%d", i), ns, step("a", "writes-node"), step("b", "writes-node")))
	}
	for i := range n {
		e.ready(fmt.Sprintf("writes-%d", i))
	}
	framework.Eventually(t, timeout, "the queue to drain", func(context.Context) (bool, error) { return e.m.QueuesEmpty() })

	converged := countWrites(e.m)
	t.Logf("writes for %d new Pipelines of %d steps until Ready: %d children, %d status, %d events, %d other\n%s",
		n, steps, converged.children, converged.status, converged.events, converged.other, strings.Join(converged.lines, "\n"))
	if want := n * (2 + 2*steps + 2); converged.children != want {
		t.Errorf("child writes = %d, want exactly %d (one create per child, two more for the claim)", converged.children, want)
	}
	if converged.other != 0 || converged.events != 0 {
		t.Errorf("unexpected writes: %d other, %d events", converged.other, converged.events)
	}
	// Children are read from the caches: a missing one is created with no
	// read from the API server first; only the claim's first apply reads it.
	if reads := childReads(e.m.Writes.Reads()); reads != n+converged.childConflicts {
		t.Errorf("%d reads of one child from the API server, want %d (one per claim, one per retry after a 409): %v", reads, n+converged.childConflicts, e.m.Writes.Reads())
	}
	framework.Eventually(t, timeout, "a MODIFIED event for every status write", func(context.Context) (bool, error) {
		return int(modified.Load()) >= converged.status, nil
	})
	if got := int(modified.Load()); got != converged.status {
		t.Errorf("%d status writes made %d changes: some wrote nothing new", converged.status, got)
	}
	// The first reconcile of each makes 2 + 2×steps creates and no status
	// write: the reconcile that observes the children writes the first. The
	// rest follow what changes: the volume's phase (Pending, Available,
	// Bound) and the claim's (Pending, Bound), and per step each replica
	// being created and turning Ready. How many of those changes one
	// reconcile sees at once (childBatchPeriod batches them) depends on
	// timing, so the bound is the number of changes there are, each written
	// at most once (checked above).
	const replicasPerStep, storageChanges = 1, 3
	maxStatusWrites := storageChanges + 2*steps*replicasPerStep
	t.Logf("per Pipeline: %d child writes, %.1f status writes (at most %d)", converged.children/n, float64(converged.status)/n, maxStatusWrites)
	if converged.status > n*maxStatusWrites {
		t.Errorf("%d status writes for %d Pipelines, want at most %d each", converged.status, n, maxStatusWrites)
	}

	writesBefore := e.m.Writes.Total()
	reconcilesBefore := framework.ReconcileCount(t, pipeline.ControllerName)
	framework.Eventually(t, timeout, "two rounds of resync", func(context.Context) (bool, error) {
		return framework.ReconcileCount(t, pipeline.ControllerName)-reconcilesBefore >= 2*n, nil
	})
	if extra := e.m.Writes.Total() - writesBefore; extra != 0 {
		t.Fatalf("resync of converged Pipelines made %d write requests:\n%s", extra, e.m.Writes.Summary())
	}
}

// A manager whose ServiceAccount has only the shipped ClusterRole runs the
// Pipeline controller end to end: it creates the children's namespace,
// the storage, steps and status, and deletes a removed step's children.
func TestShippedClusterRoleSuffices(t *testing.T) {
	ctx := context.Background()
	if crdErr != nil {
		t.Fatalf("installing the CRDs: %v", crdErr)
	}
	client := cp.Client
	var role rbacv1.ClusterRole
	framework.LoadManifest(t, "rbac/controllers/pipeline.yaml", &role)
	for _, rule := range role.Rules {
		for _, s := range append(append(rule.APIGroups, rule.Resources...), rule.Verbs...) {
			if s == "*" {
				t.Errorf("wildcard in the shipped ClusterRole: %+v", rule)
			}
		}
	}
	saConfig := framework.ServiceAccountWithClusterRoles(t, cp, framework.CreateNamespace(t, client), "rbac/controllers/pipeline.yaml")

	m := framework.StartManager(t, saConfig, func(o *options.Options) {
		o.Generic.Controllers = []string{pipeline.ControllerName}
		o.Pipeline.AllowedNamespaces = []string{pipeline.AnyNamespace}
		// The shipped role must cover creating namespaces too.
		o.Pipeline.CreateNamespaces = true
	})
	framework.Eventually(t, timeout, "/readyz/informer-sync with the shipped RBAC", func(context.Context) (bool, error) {
		status, _, err := m.Get("/readyz/informer-sync")
		return status == 200, err
	})

	if err := cp.CreateFakeNodes(ctx, "rbac-node"); err != nil {
		t.Fatal(err)
	}
	crd, err := newCRDClient() // the test's own client is the admin
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, kube: client, crd: crd, m: m}
	ns := "pipeline-rbac-" + rand.String(5) // the controller creates it
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	p := e.create(newPipeline("rbac", ns, step("a", "rbac-node"), step("b", "rbac-node")))
	checkChildren(t, client, e.ready(p.Name), ns)

	e.update(p.Name, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps = p.Spec.Steps[:1] })
	e.waitDeployments(p.Name, stepName(p.Name, "a"))
	e.ready(p.Name)
}
