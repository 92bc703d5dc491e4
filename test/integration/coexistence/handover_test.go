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

package coexistence

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// TestAppReplicasHandedOver removes spec.replicas from an App whose
// Deployment runs 3 pods, as a user does to hand scaling to an HPA: the
// Deployment never asks for fewer than 3 on the way, the manager stops
// owning its replicas, and kubectl scale then owns them. The App's replicas
// were changed once since the create, so the manager owns them by apply.
func TestAppReplicasHandedOver(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	app := createApp(t, ns, newApp("handover", ptr.To[int32](2), false))
	d := deploymentOf(t, ns, app.UID)
	available(t, ns, d.Name, 2)
	patchAppSpec(t, ns, app.Name, `{"replicas":3}`)
	available(t, ns, d.Name, 3)
	reconciled(t, ns, app.Name)

	seen := recordReplicas(t, ns, d.Name)
	patchAppSpec(t, ns, app.Name, `{"replicas":null}`)
	reconciled(t, ns, app.Name)
	handedOver(t, ns, d.Name, seen)
}

// TestPipelineStepReplicasHandedOver is TestAppReplicasHandedOver for a
// Pipeline step whose Deployment was only created so far: the manager owns
// its replicas by the create.
func TestPipelineStepReplicasHandedOver(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	s := step("llama", gpuNodeB)
	s.Replicas = ptr.To[int32](3)
	p := createPipeline(t, newPipeline("coexist-handover", ns, s))
	pipelineReady(t, p.Name)
	d := deploymentOf(t, ns, p.UID)
	available(t, ns, d.Name, 3)

	seen := recordReplicas(t, ns, d.Name)
	pipelines := crdClient(t).PipelineV1beta1().Pipelines()
	latest, err := pipelines.Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latest.Spec.Steps[0].Replicas = nil
	if _, err := pipelines.Update(context.Background(), latest, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing the step's replicas: %v", err)
	}
	pipelineReady(t, p.Name)
	handedOver(t, ns, d.Name, seen)
}

// handedOver waits until the manager no longer owns the Deployment's
// replicas, scales it to 4 as kubectl scale does, and checks that this
// holds with no write by the manager, and that the Deployment never asked
// for fewer than 3 replicas since seen started recording.
func handedOver(t *testing.T, ns, name string, seen func() []int32) {
	t.Helper()
	atLeast3 := func() {
		t.Helper()
		values := seen()
		for _, v := range values {
			if v < 3 {
				t.Fatalf("Deployment %s asked for %d replicas on the way (every spec.replicas seen: %v)", name, v, values)
			}
		}
	}
	eventually(t, "the manager to stop owning Deployment "+name+"'s spec.replicas", func(ctx context.Context) (bool, error) {
		atLeast3()
		d, err := getDeployment(ctx, ns, name)
		if err != nil {
			return false, err
		}
		for _, mf := range d.ManagedFields {
			if mf.Manager == controller.FieldManager && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:replicas"`) {
				return false, errorf("%s still owns spec.replicas (%s)", controller.FieldManager, mf.Operation)
			}
		}
		return true, nil
	})
	writes := managerWrites(deploymentsPath(ns), name)
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	if _, err := cp.Client.AppsV1().Deployments(ns).UpdateScale(context.Background(), name, scale, metav1.UpdateOptions{FieldManager: "kubectl-scale"}); err != nil {
		t.Fatalf("scaling Deployment %s: %v", name, err)
	}
	available(t, ns, name, 4)
	holds(t, "kubectl scale's replicas on Deployment "+name, func(ctx context.Context) error {
		d, err := getDeployment(ctx, ns, name)
		if err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 1); got != 4 {
			return errorf("spec.replicas %d, want kubectl scale's 4", got)
		}
		if n := managerWrites(deploymentsPath(ns), name) - writes; n != 0 {
			return errorf("the manager wrote the Deployment %d times since the scale", n)
		}
		return nil
	})
	atLeast3()
}

// recordReplicas watches the Deployment from its current version and
// records every spec.replicas it takes until the test ends; the function
// returned gives those seen so far, and fails the test if the watch ended
// (a gap in the record).
func recordReplicas(t *testing.T, ns, name string) func() []int32 {
	t.Helper()
	deployments := cp.Client.AppsV1().Deployments(ns)
	d, err := deployments.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := deployments.Watch(context.Background(), metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: d.ResourceVersion,
	})
	if err != nil {
		t.Fatalf("watching Deployment %s: %v", name, err)
	}
	var (
		mu     sync.Mutex
		values = []int32{ptr.Deref(d.Spec.Replicas, 1)}
		ended  bool
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		for event := range w.ResultChan() {
			if event.Type == watch.Error {
				break
			}
			if d, ok := event.Object.(*appsv1.Deployment); ok {
				mu.Lock()
				values = append(values, ptr.Deref(d.Spec.Replicas, 1))
				mu.Unlock()
			}
		}
		mu.Lock()
		ended = true
		mu.Unlock()
	}()
	t.Cleanup(func() {
		w.Stop()
		<-done
	})
	return func() []int32 {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if ended {
			t.Fatalf("the watch of Deployment %s ended early; spec.replicas seen until then: %v", name, values)
		}
		return slices.Clone(values)
	}
}
