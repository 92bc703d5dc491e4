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
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A conflict says only that the cache was behind: it is retried, and never
// makes the Pipeline Degraded (nor Ready=False because of it) or records a
// Warning event (issue 12, defect 5). The first creates of the step's
// Deployment get the API server's 409.
func TestConflictsNeverMakeThePipelineDegraded(t *testing.T) {
	const name, conflicts = "flaky", 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := framework.CreateNamespace(t, cp.Client)
	cfg, injector := framework.InjectConflicts(cp.Config, conflicts, framework.IsCreateOf("/namespaces/"+ns+"/deployments"))
	e := setupWithConfig(t, cfg, nil)
	if err := cp.CreateFakeNodes(ctx, "flaky-node"); err != nil {
		t.Fatal(err)
	}
	w, err := e.crd.PipelineV1beta1().Pipelines().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	p := e.create(newPipeline(name, ns, step("a", "flaky-node")))
	ready := e.ready(p.Name)
	if got := injector.Injected(); got != conflicts {
		t.Fatalf("%d conflicts injected, want %d", got, conflicts)
	}
	for done := false; !done; {
		ev := <-w.ResultChan()
		got, ok := ev.Object.(*pipelinev1beta1.Pipeline)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, pipelinev1beta1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("resourceVersion %s: Degraded=True %s %q", got.ResourceVersion, c.Reason, c.Message)
		}
		done = got.ResourceVersion == ready.ResourceVersion
	}
	events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "type": corev1.EventTypeWarning,
	}).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		t.Errorf("Warning event %s: %s", ev.Reason, ev.Message)
	}
}

// While a step's Deployment write keeps failing with a conflict, the
// Pipeline's status does not claim the new generation; once the write goes
// through, it does, with the Deployment changed.
func TestStatusWaitsForAChildWriteThatConflicted(t *testing.T) {
	const name = "retried"
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	cfg, injector := framework.InjectConflicts(cp.Config, 0, func(req *http.Request) bool {
		return (req.Method == http.MethodPatch || req.Method == http.MethodPut) &&
			strings.Contains(req.URL.Path, "/namespaces/"+ns+"/deployments/")
	})
	e := setupWithConfig(t, cfg, nil)
	if err := cp.CreateFakeNodes(ctx, "retried-node"); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline(name, ns, step("a", "retried-node")))
	e.ready(p.Name)

	injector.Arm(1000)
	e.update(name, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].Image = "nginx:1.27" })
	framework.Eventually(t, timeout, "the step Deployment's write to conflict and be retried", func(context.Context) (bool, error) {
		return injector.Injected() >= 3, nil
	})
	got := e.get(name)
	if got.Status.ObservedGeneration == got.Generation {
		t.Errorf("status claims generation %d while every write of its Deployment got a conflict (%d so far): %+v",
			got.Generation, injector.Injected(), got.Status.Conditions)
	}

	injector.Stop()
	framework.Eventually(t, timeout, "the status of the new generation, with the new image", func(ctx context.Context) (bool, error) {
		got, err := e.crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.Status.ObservedGeneration != got.Generation {
			return false, err
		}
		d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, stepName(name, "a"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "docker.io/library/nginx:1.27" {
			return false, fmt.Errorf("status observed generation %d with the Deployment's image still %s", got.Generation, img)
		}
		return true, nil
	})
}
