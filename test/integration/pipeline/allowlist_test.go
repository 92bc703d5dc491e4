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
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// withStorage is p with its NFS export replaced.
func withStorage(p *pipelinev1beta1.Pipeline, server, share string) *pipelinev1beta1.Pipeline {
	p.Spec.ModelStorage.CSIParameter = map[string]string{"server": server, "share": share}
	return p
}

// With --pipeline-allowed-nfs set and no webhook, a Pipeline naming another
// NFS server, a share beside the allowed prefix, or a ".." escape from it
// gets no PersistentVolume nor any other child, Degraded=True with reason
// StorageNotAllowed naming the allowed exports, and one Warning event; one
// inside the list converges (issue 25, item 1).
func TestStorageOutsideTheAllowList(t *testing.T) {
	const allowed = "192.168.20.235:/home/aiedge"
	e := setup(t, func(o *options.Options) { o.Pipeline.AllowedNFS = []string{allowed} })
	if err := cp.CreateFakeNodes(context.Background(), "nfs-allow-node"); err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, e.kube)

	refused := []*pipelinev1beta1.Pipeline{
		e.create(withStorage(newPipeline("nfs-other-server", ns, step("a", "nfs-allow-node")), "10.0.0.66", "/home/aiedge/csiTest")),
		e.create(withStorage(newPipeline("nfs-beside-prefix", ns, step("a", "nfs-allow-node")), "192.168.20.235", "/home/aiedge-evil")),
		e.create(withStorage(newPipeline("nfs-dotdot", ns, step("a", "nfs-allow-node")), "192.168.20.235", "/home/aiedge/../../etc")),
	}
	// The notes' export, under the allowed prefix.
	e.create(newPipeline("nfs-allowed", ns, step("a", "nfs-allow-node")))
	e.ready("nfs-allowed")

	for _, p := range refused {
		checkRefused(t, e, p.Name, pipelinev1beta1.ReasonStorageNotAllowed, "allowed (--pipeline-allowed-nfs): "+allowed)
	}
}

// With --pipeline-allowed-images set and no webhook, a Pipeline with a step
// image outside the prefixes, as the kubelet resolves it, gets nothing at
// all, not even the children of its allowed steps; one whose images all
// match converges (issue 25, item 3).
func TestImageOutsideTheAllowList(t *testing.T) {
	const allowed = "docker.io/library/nginx"
	e := setup(t, func(o *options.Options) { o.Pipeline.AllowedImages = []string{allowed} })
	if err := cp.CreateFakeNodes(context.Background(), "image-allow-node"); err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, e.kube)
	withImage := func(image string) pipelinev1beta1.PipelineStep {
		s := step("b", "image-allow-node")
		s.Image = image
		return s
	}

	refused := []*pipelinev1beta1.Pipeline{
		// docker.io/library/nginx-evil: a neighbour of the allowed repository.
		e.create(newPipeline("image-neighbour", ns, step("a", "image-allow-node"), withImage("nginx-evil:latest"))),
		e.create(newPipeline("image-other-registry", ns, withImage("registry.evil.example/library/nginx:latest"))),
	}
	// nginx:latest is docker.io/library/nginx:latest.
	e.create(newPipeline("image-allowed", ns, step("a", "image-allow-node"), withImage("docker.io/library/nginx:1.27")))
	e.ready("image-allowed")

	for _, p := range refused {
		checkRefused(t, e, p.Name, pipelinev1beta1.ReasonImageNotAllowed, "allowed prefixes (--pipeline-allowed-images): "+allowed)
	}
}

// checkRefused waits for Pipeline name to be Degraded with reason and a
// message containing msg, then requires that it has no children at all and
// exactly one Warning event with reason, sent once. Called after an allowed
// Pipeline converged, so that an absence is not just slowness.
func checkRefused(t *testing.T, e *env, name, reason, msg string) {
	t.Helper()
	ctx := context.Background()
	p := e.waitCondition(name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, msg)
	if c := conditionOf(p, pipelinev1beta1.ConditionDegraded); c.Reason != reason {
		t.Errorf("Pipeline %s: Degraded reason = %q, want %q", name, c.Reason, reason)
	}
	if c := conditionOf(p, pipelinev1beta1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Errorf("Pipeline %s: Ready = %s, want False", name, c.Status)
	}
	waitWarning(t, e, name, reason)

	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{pipeline.LabelPipeline: name}).String()}
	volumes, err := e.kube.CoreV1().PersistentVolumes().List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := e.kube.CoreV1().PersistentVolumeClaims("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	deployments, err := e.kube.AppsV1().Deployments("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	services, err := e.kube.CoreV1().Services("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(volumes.Items) + len(claims.Items) + len(deployments.Items) + len(services.Items); n != 0 {
		t.Errorf("refused Pipeline %s got %d volumes, %d claims, %d Deployments, %d Services; want none",
			name, len(volumes.Items), len(claims.Items), len(deployments.Items), len(services.Items))
	}
	events, err := e.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "reason": reason, "type": corev1.EventTypeWarning}).String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 || events.Items[0].Count != 1 {
		t.Errorf("Pipeline %s: %d %s events (first counted %d times), want one, once", name, len(events.Items), reason, firstCount(events.Items))
	} else if !strings.Contains(events.Items[0].Message, msg) {
		t.Errorf("Pipeline %s: event message %q, want it to contain %q", name, events.Items[0].Message, msg)
	}
}

// A Pipeline that converged before --pipeline-allowed-nfs excluded its
// export keeps its children after the restart that sets the list: the
// controller writes nothing but its status, Degraded with
// StorageNotAllowed, and one Warning event. Moving it to an allowed export,
// a spec change, lets it converge again.
func TestStorageRefusedAfterARestartKeepsChildren(t *testing.T) {
	const name = "nfs-restart"
	ctx := context.Background()
	if err := cp.CreateFakeNodes(ctx, "nfs-restart-node"); err != nil {
		t.Fatal(err)
	}
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	e.create(newPipeline(name, ns, step("a", "nfs-restart-node")))
	e.ready(name)
	before := childNames(t, e, name)
	if err := e.m.Stop(); err != nil {
		t.Fatal(err)
	}

	const allowed = "10.1.1.1"
	cfg, writes := framework.CountWrites(cp.Config)
	e = setupWithConfig(t, cfg, func(o *options.Options) { o.Pipeline.AllowedNFS = []string{allowed} })
	checkRefused := func() {
		t.Helper()
		p := e.waitCondition(name, pipelinev1beta1.ConditionDegraded, metav1.ConditionTrue, "allowed (--pipeline-allowed-nfs): "+allowed)
		if c := conditionOf(p, pipelinev1beta1.ConditionDegraded); c.Reason != pipelinev1beta1.ReasonStorageNotAllowed {
			t.Errorf("Degraded reason = %q, want %q", c.Reason, pipelinev1beta1.ReasonStorageNotAllowed)
		}
	}
	checkRefused()
	waitWarning(t, e, name, pipelinev1beta1.ReasonStorageNotAllowed)
	framework.Eventually(t, timeout, "the manager's queues to drain", func(context.Context) (bool, error) { return e.m.QueuesEmpty() })
	for req, n := range writes.ByRequest() {
		if !strings.HasSuffix(req, "/pipelines/"+name+"/status") && !strings.Contains(req, "/events") {
			t.Errorf("the restarted manager wrote %d× %s; want only the status and the event", n, req)
		}
	}
	if after := childNames(t, e, name); !slices.Equal(after, before) {
		t.Errorf("children after the refusal %q, want those from before %q, untouched", after, before)
	}

	e.update(name, func(p *pipelinev1beta1.Pipeline) { p.Spec.ModelStorage.CSIParameter["server"] = allowed })
	e.ready(name)
}

// childNames lists the kind and name of every child of Pipeline name that
// is not being deleted, sorted.
func childNames(t *testing.T, e *env, name string) []string {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{pipeline.LabelPipeline: name}).String()}
	var names []string
	add := func(kind string, obj metav1.Object) {
		if obj.GetDeletionTimestamp() == nil {
			names = append(names, kind+"/"+obj.GetNamespace()+"/"+obj.GetName())
		}
	}
	volumes, err := e.kube.CoreV1().PersistentVolumes().List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range volumes.Items {
		add("PersistentVolume", &volumes.Items[i])
	}
	claims, err := e.kube.CoreV1().PersistentVolumeClaims("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		add("PersistentVolumeClaim", &claims.Items[i])
	}
	deployments, err := e.kube.AppsV1().Deployments("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range deployments.Items {
		add("Deployment", &deployments.Items[i])
	}
	services, err := e.kube.CoreV1().Services("").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range services.Items {
		add("Service", &services.Items[i])
	}
	slices.Sort(names)
	return names
}
