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

package appcoexist

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// legacyLabels are the labels the manager of 08da2b9 put on every child of
// an App and on its pods; it selected on the instance label alone.
func legacyLabels(name string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       name,
		"app.kubernetes.io/instance":   name,
		"app.kubernetes.io/managed-by": "ndsl-controller-manager",
	}
}

func legacyOwner(app *appv1beta1.App) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion("ingress.example.com/v1beta1").WithKind("App").
		WithName(app.Name).WithUID(app.UID).WithController(true).WithBlockOwnerDeletion(true)
}

// legacyAppliedAnnotation is the hash annotation older managers applied to
// every child; the first apply of this one removes it.
const legacyAppliedAnnotation = "controller-manager.ndsl.cn/applied"

// applyLegacyChildren writes the App's Deployment and Service exactly as
// the manager of 08da2b9 did: the same apply configurations, field manager
// and applied-hash annotation.
func (e *env) applyLegacyChildren(ctx context.Context, app *appv1beta1.App) {
	e.t.Helper()
	d := appsv1ac.Deployment(app.Name, e.ns).
		WithLabels(legacyLabels(app.Name)).
		WithOwnerReferences(legacyOwner(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(*app.Spec.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app.kubernetes.io/instance": app.Name})).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(legacyLabels(app.Name)).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").WithImage(app.Spec.Image).
					WithPorts(corev1ac.ContainerPort().WithContainerPort(80).WithProtocol(corev1.ProtocolTCP))))))
	d.WithAnnotations(map[string]string{legacyAppliedAnnotation: "0f865f99ed09c0f3f25bac5a"})
	if _, err := e.kube.AppsV1().Deployments(e.ns).Apply(ctx, d, metav1.ApplyOptions{FieldManager: controller.FieldManager, Force: true}); err != nil {
		e.t.Fatalf("applying the legacy Deployment: %v", err)
	}

	svc := corev1ac.Service(app.Name, e.ns).
		WithLabels(legacyLabels(app.Name)).
		WithOwnerReferences(legacyOwner(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(map[string]string{"app.kubernetes.io/instance": app.Name}).
			WithPorts(corev1ac.ServicePort().WithPort(80).WithTargetPort(intstr.FromInt32(80)).WithProtocol(corev1.ProtocolTCP)))
	svc.WithAnnotations(map[string]string{legacyAppliedAnnotation: "38d4d6d0b44525b9f5b0a1ac"})
	if _, err := e.kube.CoreV1().Services(e.ns).Apply(ctx, svc, metav1.ApplyOptions{FieldManager: controller.FieldManager, Force: true}); err != nil {
		e.t.Fatalf("applying the legacy Service: %v", err)
	}
}

// endpointWatch watches a Service's EndpointSlices and keeps the fewest
// ready endpoints they held together after any change, so that no state
// between two polls goes unseen.
type endpointWatch struct {
	mu      sync.Mutex
	changes int
	fewest  int
	when    string
	cancel  context.CancelFunc
}

func (e *env) watchEndpoints(service string, phase func() string) *endpointWatch {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &endpointWatch{fewest: -1, cancel: cancel}
	factory := informers.NewSharedInformerFactoryWithOptions(e.kube, 0, informers.WithNamespace(e.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	informer := factory.Discovery().V1().EndpointSlices().Informer()
	count := func(any) {
		n := 0
		for _, obj := range informer.GetStore().List() {
			for _, ep := range obj.(*discoveryv1.EndpointSlice).Endpoints {
				if ptr.Deref(ep.Conditions.Ready, false) {
					n++
				}
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.changes++
		if w.fewest < 0 || n < w.fewest {
			w.fewest, w.when = n, phase()
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    count,
		UpdateFunc: func(_, obj any) { count(obj) },
		DeleteFunc: count,
	}); err != nil {
		e.t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		e.t.Fatal("the EndpointSlice informer did not sync")
	}
	return w
}

// finish stops the watch and returns how many changes it saw and the
// fewest ready endpoints, with the phase they were seen in.
func (w *endpointWatch) finish() (changes, fewest int, when string) {
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changes, w.fewest, w.when
}

// An App whose Deployment and Service the manager of 08da2b9 created, on
// the instance selector, moves to the new selector with no one deleting
// anything by hand, and its Service keeps ready endpoints throughout.
func TestMigrationKeepsEndpoints(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	app := e.create(&appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "mig"},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2), EnableService: true},
	})
	e.applyLegacyChildren(ctx, app)
	framework.Eventually(t, timeout, "the legacy Deployment's 2 endpoints to be ready", func(ctx context.Context) (bool, error) {
		_, n, err := e.endpoints(ctx, "mig")
		return n == 2, err
	})

	legacy, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "mig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var phase sync.Map
	phase.Store("p", "before the manager started")
	w := e.watchEndpoints("mig", func() string { p, _ := phase.Load("p"); return p.(string) })
	defer func() {
		if w != nil {
			w.finish()
		}
	}()
	// With nothing but the shipped ClusterRole: the migration's deletes
	// are allowed by it.
	e.startManagerAs(framework.ServiceAccountWithClusterRoles(t, cp, e.ns, "rbac/controllers/app.yaml"))

	newSelector := map[string]string{"ingress.example.com/app": "mig"}
	framework.Eventually(t, 2*timeout, "the migration to finish", func(ctx context.Context) (bool, error) {
		state, err := e.migrationState(ctx, "mig", newSelector)
		if err != nil || state == "done" {
			return err == nil, err
		}
		if last, _ := phase.Swap("p", state); last != state {
			t.Logf("migration: %s", state)
		}
		return false, errors.New(state) // reported on timeout
	})
	changes, fewest, when := w.finish()
	w = nil
	t.Logf("%d changes of the Service's EndpointSlices during the migration, fewest ready endpoints %d (%s)", changes, fewest, when)
	if fewest < 1 {
		t.Errorf("the Service had %d ready endpoints during the migration (%s)", fewest, when)
	}
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "mig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == legacy.UID {
		t.Errorf("the Deployment is still the legacy one, %s", d.UID)
	}
	// Every pod was replaced by one on the final template, and the
	// endpoints followed: they changed more than once.
	if changes < 4 {
		t.Errorf("the EndpointSlices changed %d times: the pods were not rolled", changes)
	}
	// Settled, not only ready: on a loaded machine the App is Ready while
	// the rollout's last status changes (Progressing, the old pods going)
	// are still on their way, and each is a status write of its own.
	e.waitApp("mig", "ready, the rollout done and 2 replicas", func(a *appv1beta1.App) bool {
		p := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionProgressing)
		return ready(a) && p != nil && p.Status == metav1.ConditionFalse &&
			a.Status.Replicas == 2 && a.Status.ReadyReplicas == 2 && a.Status.AvailableReplicas == 2
	})
	// The older managers' hash annotation was this manager's applied field:
	// its apply, which no longer sets it, removed it.
	svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "mig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := svc.Annotations[legacyAppliedAnnotation]; ok {
		t.Errorf("the migrated Service still carries %s=%s", legacyAppliedAnnotation, v)
	}
	// What an HPA on the App reads the pods' metrics by.
	framework.Eventually(t, timeout, "the App's scale selector to be the new one", func(ctx context.Context) (bool, error) {
		scale, err := e.getScale(ctx, "mig")
		return err == nil && scale.Status.Selector == "ingress.example.com/app=mig", err
	})

	// Migrated, the App costs no write: a reconcile of it changes nothing.
	e.waitQuiet()
	before, _ := e.writes("")
	if _, err := e.apps.Patch(ctx, "mig", types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitApp("mig", "the touch seen", func(a *appv1beta1.App) bool { return a.Annotations["touched"] == "yes" })
	e.waitQuiet()
	if after, summary := e.writes(""); after != before {
		t.Errorf("a reconcile of the migrated App wrote %d times:\n%s", after-before, summary)
	}
}

// migrationState describes where the App's children are, "done" once
// they are on the new selector with no legacy label, no legacy pod and no
// ReplicaSet the Deployment does not control.
func (e *env) migrationState(ctx context.Context, name string, newSelector map[string]string) (string, error) {
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "Deployment missing", err
	}
	svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	switch {
	case d.DeletionTimestamp != nil:
		return "legacy Deployment being deleted", nil
	case !maps.Equal(d.Spec.Selector.MatchLabels, newSelector):
		return fmt.Sprintf("Deployment on selector %v, Service on %v", d.Spec.Selector.MatchLabels, svc.Spec.Selector), nil
	case !maps.Equal(svc.Spec.Selector, newSelector):
		return fmt.Sprintf("Service still on selector %v", svc.Spec.Selector), nil
	}
	for _, obj := range []metav1.Object{d, &d.Spec.Template, svc} {
		if _, ok := obj.GetLabels()["app.kubernetes.io/instance"]; ok {
			return fmt.Sprintf("%T still labelled app.kubernetes.io/instance", obj), nil
		}
	}
	if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 2 || d.Status.Replicas != 2 || d.Status.AvailableReplicas != 2 {
		return fmt.Sprintf("new Deployment rolling out: generation %d observed %d, replicas %d updated %d available %d",
			d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas), nil
	}
	rss, err := e.kube.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, rs := range rss.Items {
		if !metav1.IsControlledBy(&rs, d) {
			return fmt.Sprintf("ReplicaSet %s not controlled by the Deployment (controller %v)", rs.Name, metav1.GetControllerOf(&rs)), nil
		}
	}
	pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, pod := range pods.Items {
		if _, ok := pod.Labels["app.kubernetes.io/instance"]; ok {
			return "legacy pod " + pod.Name + " still there", nil
		}
	}
	if len(pods.Items) != 2 {
		return fmt.Sprintf("%d pods", len(pods.Items)), nil
	}
	return "done", nil
}
