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

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/controllers/pipeline"
)

// snapshot is the cluster's state as far as convergence is concerned.
type snapshot struct {
	apps        []appv1.App
	pipelines   []pipelinev1.Pipeline
	services    []corev1.Service
	deployments []appsv1.Deployment
	svcChildren []corev1.Service
	ingresses   []networkingv1.Ingress
	pvcs        []corev1.PersistentVolumeClaim
	pvs         []corev1.PersistentVolume
}

func (w *world) snapshot(ctx context.Context) (*snapshot, error) {
	s := &snapshot{}
	kube, typed := w.c.Kube, w.c.Typed
	apps, err := typed.AppV1().Apps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.apps = apps.Items
	pls, err := typed.PipelineV1().Pipelines().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.pipelines = pls.Items
	ds, err := kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.deployments = ds.Items
	svcs, err := kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, svc := range svcs.Items {
		if strings.HasPrefix(svc.Namespace, serviceNamespacePrefix) && svc.Labels[userLabel] == "" {
			s.services = append(s.services, svc)
		}
		if metav1.GetControllerOf(&svc) != nil {
			s.svcChildren = append(s.svcChildren, svc)
		}
	}
	ings, err := kube.NetworkingV1().Ingresses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.ingresses = ings.Items
	pvcs, err := kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.pvcs = pvcs.Items
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.pvs = pvs.Items
	return s, nil
}

// controlled groups objects by the UID of their controller, per kind.
func controlled[T any](items []T) map[types.UID][]*T {
	out := map[types.UID][]*T{}
	for i := range items {
		if ref := metav1.GetControllerOf(any(&items[i]).(metav1.Object)); ref != nil {
			out[ref.UID] = append(out[ref.UID], &items[i])
		}
	}
	return out
}

// problems lists what is not converged: every owner Ready with exactly its
// children, each child as the controller wants it, no child whose owner is
// gone. Empty means converged.
func (s *snapshot) problems() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	deps, svcs, ings, pvcs, pvs := controlled(s.deployments), controlled(s.svcChildren), controlled(s.ingresses), controlled(s.pvcs), controlled(s.pvs)
	owners := map[types.UID]bool{}

	for i := range s.apps {
		app := &s.apps[i]
		owners[app.UID] = true
		name := "App " + app.Namespace + "/" + app.Name
		if c := meta.FindStatusCondition(app.Status.Conditions, appv1.ConditionReady); app.Status.ObservedGeneration != app.Generation ||
			c == nil || c.Status != metav1.ConditionTrue {
			add("%s not Ready for generation %d: %s", name, app.Generation, describeConditions(app.Status.ObservedGeneration, app.Status.Conditions))
		}
		wantD, wantS, wantI, err := appcontroller.DesiredChildren(app, appOptions())
		if err != nil {
			add("%s: %v", name, err)
			continue
		}
		if d := exactlyOne(add, name, "Deployment", deps[app.UID], wantD.Name); d != nil {
			if ptr.Deref(d.Spec.Replicas, 1) != ptr.Deref(wantD.Spec.Replicas, 1) || imageOf(d, appcontroller.ContainerName) != app.Spec.Image {
				add("%s: Deployment has %d replicas of %q, want %d of %q", name, ptr.Deref(d.Spec.Replicas, 1),
					imageOf(d, appcontroller.ContainerName), ptr.Deref(wantD.Spec.Replicas, 1), app.Spec.Image)
			}
		}
		checkOptional(add, name, "Service", svcs[app.UID], wantS != nil, app.Name)
		if svc := pick(svcs[app.UID], wantS != nil); svc != nil && !mapsEqual(svc.Spec.Selector, wantS.Spec.Selector) {
			add("%s: Service selector %v, want %v", name, svc.Spec.Selector, wantS.Spec.Selector)
		}
		checkOptional(add, name, "Ingress", ings[app.UID], wantI != nil, app.Name)
	}

	for i := range s.services {
		svc := &s.services[i]
		owners[svc.UID] = true
		name := "Service " + svc.Namespace + "/" + svc.Name
		_, wants := svc.Annotations[ingress.AnnotationEnabled]
		wants = wants && svc.Annotations[ingress.AnnotationEnabled] != "false"
		checkOptional(add, name, "Ingress", ings[svc.UID], wants, svc.Name)
		if !wants {
			continue
		}
		want, err := ingress.DesiredIngress(svc, ingressOptions())
		if err != nil {
			add("%s: %v", name, err)
			continue
		}
		if got := pick(ings[svc.UID], true); got != nil && !sameRoutes(got, want) {
			add("%s: Ingress routes %s, want %s", name, routes(got), routes(want))
		}
	}

	for i := range s.pipelines {
		p := &s.pipelines[i]
		owners[p.UID] = true
		name := "Pipeline " + p.Name
		if c := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionReady); p.Status.ObservedGeneration != p.Generation ||
			c == nil || c.Status != metav1.ConditionTrue {
			add("%s not Ready for generation %d: %s", name, p.Generation, describeConditions(p.Status.ObservedGeneration, p.Status.Conditions))
		}
		ns := p.Spec.Namespace
		if ns == "" {
			ns = pipelineNamespace
		}
		pv, pvc, wantDeps, wantSvcs := pipeline.DesiredChildren(p, ns)
		if v := exactlyOne(add, name, "PersistentVolume", pvs[p.UID], pv.Name); v != nil && v.Status.Phase != corev1.VolumeBound {
			add("%s: PersistentVolume %s is %s", name, v.Name, v.Status.Phase)
		}
		if c := exactlyOne(add, name, "PersistentVolumeClaim", pvcs[p.UID], pvc.Name); c != nil && c.Status.Phase != corev1.ClaimBound {
			add("%s: PersistentVolumeClaim %s is %s", name, c.Name, c.Status.Phase)
		}
		var depNames, svcNames []string
		for _, d := range wantDeps {
			depNames = append(depNames, d.Name)
		}
		for _, s := range wantSvcs {
			svcNames = append(svcNames, s.Name)
		}
		exactly(add, name, "Deployment", deps[p.UID], depNames)
		exactly(add, name, "Service", svcs[p.UID], svcNames)
		for _, want := range wantDeps {
			for _, d := range deps[p.UID] {
				if d.Name == want.Name && ptr.Deref(d.Spec.Replicas, 1) != ptr.Deref(want.Spec.Replicas, 1) {
					add("%s: Deployment %s has %d replicas, want %d", name, d.Name, ptr.Deref(d.Spec.Replicas, 1), ptr.Deref(want.Spec.Replicas, 1))
				}
			}
		}
	}

	// Children of owners that are gone: the garbage collector's, but a
	// manager that recreates them after the owner went would show here.
	for _, m := range []map[types.UID][]metav1.Object{objects(deps), objects(svcs), objects(ings), objects(pvcs), objects(pvs)} {
		for uid, objs := range m {
			if owners[uid] {
				continue
			}
			for _, o := range objs {
				ref := metav1.GetControllerOf(o)
				if slices.Contains([]string{"App", "Pipeline", "Service"}, ref.Kind) && o.GetDeletionTimestamp() == nil {
					add("%s/%s is controlled by %s %s, which is gone", o.GetNamespace(), o.GetName(), ref.Kind, ref.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func objects[T any](m map[types.UID][]*T) map[types.UID][]metav1.Object {
	out := map[types.UID][]metav1.Object{}
	for uid, items := range m {
		for _, it := range items {
			out[uid] = append(out[uid], any(it).(metav1.Object))
		}
	}
	return out
}

// exactlyOne checks that the owner controls exactly one object of the kind,
// named name, and returns it.
func exactlyOne[T any](add func(string, ...any), owner, kind string, got []*T, name string) *T {
	exactly(add, owner, kind, got, []string{name})
	for _, g := range got {
		if any(g).(metav1.Object).GetName() == name {
			return g
		}
	}
	return nil
}

// exactly checks that the owner controls exactly the objects of the kind
// called names.
func exactly[T any](add func(string, ...any), owner, kind string, got []*T, names []string) {
	var have []string
	for _, g := range got {
		have = append(have, any(g).(metav1.Object).GetName())
	}
	slices.Sort(have)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(have, want) {
		add("%s controls %s %v, want exactly %v", owner, kind, have, want)
	}
}

func checkOptional[T any](add func(string, ...any), owner, kind string, got []*T, wanted bool, name string) {
	if wanted {
		exactly(add, owner, kind, got, []string{name})
	} else {
		exactly(add, owner, kind, got, nil)
	}
}

func pick[T any](items []*T, wanted bool) *T {
	if !wanted || len(items) != 1 {
		return nil
	}
	return items[0]
}

func imageOf(d *appsv1.Deployment, container string) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// routes is an Ingress's rules in short: host -> service:port, ...
func routes(ing *networkingv1.Ingress) string {
	var parts []string
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			parts = append(parts, r.Host+" -> (none)")
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Service != nil {
				parts = append(parts, fmt.Sprintf("%s%s -> %s:%d%s", r.Host, p.Path, p.Backend.Service.Name, p.Backend.Service.Port.Number, p.Backend.Service.Port.Name))
			}
		}
	}
	return strings.Join(parts, ", ")
}

func sameRoutes(a, b *networkingv1.Ingress) bool { return routes(a) == routes(b) }

func describeConditions(observed int64, conds []metav1.Condition) string {
	parts := []string{fmt.Sprintf("observed %d", observed)}
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, " ")
}

// The managers' domains: without them Apps and annotated Services get no
// Ingress (a hostless one would catch every request of its class).
const (
	appDomain     = "apps.chaos.test"
	serviceDomain = "ingress.chaos.test"
)

func appOptions() appcontroller.Options {
	o := appcontroller.DefaultOptions()
	o.IngressDomain = appDomain
	return o
}

func ingressOptions() ingress.Options {
	o := ingress.DefaultOptions()
	o.DefaultDomain = serviceDomain
	return o
}
