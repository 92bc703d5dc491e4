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

package app

import (
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

func testApp(mutate ...func(*appv1.App)) *appv1.App {
	app := &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "app-uid", Generation: 1},
		Spec: appv1.AppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To[int32](3),
			Exposure: appv1.ExposureIngress,
			Port:     8080,
		},
	}
	for _, m := range mutate {
		m(app)
	}
	return app
}

func mustTyped[T any](t *testing.T, ac any) *T {
	t.Helper()
	obj, err := controller.Typed[T](ac)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// checkChildMeta checks what every child shares: name, namespace, labels and
// the controller reference.
func checkChildMeta(t *testing.T, app *appv1.App, obj metav1.Object) {
	t.Helper()
	if obj.GetName() != app.Name || obj.GetNamespace() != app.Namespace {
		t.Errorf("name = %s/%s, want %s/%s", obj.GetNamespace(), obj.GetName(), app.Namespace, app.Name)
	}
	want := map[string]string{NameLabel: app.Name, AppLabel: app.Name, controller.ManagedByLabel: controller.ManagedByValue}
	if got := obj.GetLabels(); len(got) != len(want) || !labels.SelectorFromSet(want).Matches(labels.Set(got)) {
		t.Errorf("labels = %v, want %v", got, want)
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != app.UID || ref.Kind != "App" || ref.APIVersion != "ingress.example.com/v1" ||
		ref.Name != app.Name || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference = %+v", ref)
	}
}

func TestDesiredDeployment(t *testing.T) {
	cases := []struct {
		name           string
		app            *appv1.App
		wantReplicas   int32
		wantPort       int32
		wantPullPolicy corev1.PullPolicy
	}{
		{name: "as specified", app: testApp(), wantReplicas: 3, wantPort: 8080},
		{name: "pull policy IfNotPresent", app: testApp(withPullPolicy(corev1.PullIfNotPresent)), wantReplicas: 3, wantPort: 8080,
			wantPullPolicy: corev1.PullIfNotPresent},
		{name: "pull policy Never", app: testApp(withPullPolicy(corev1.PullNever)), wantReplicas: 3, wantPort: 8080,
			wantPullPolicy: corev1.PullNever},
		{name: "pull policy Always", app: testApp(withPullPolicy(corev1.PullAlways)), wantReplicas: 3, wantPort: 8080,
			wantPullPolicy: corev1.PullAlways},
		{name: "zero replicas stay zero", app: testApp(func(a *appv1.App) { a.Spec.Replicas = ptr.To[int32](0) }), wantReplicas: 0, wantPort: 8080},
		// -1: not set, left to whoever scales the Deployment.
		{name: "unset replicas stay unset, unset port takes the CRD default", app: testApp(func(a *appv1.App) { a.Spec.Replicas, a.Spec.Port = nil, 0 }),
			wantReplicas: -1, wantPort: 80},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mustTyped[appsv1.Deployment](t, desiredDeployment(tc.app, newSelectors(tc.app)))
			checkChildMeta(t, tc.app, d)
			if got := ptr.Deref(d.Spec.Replicas, -1); got != tc.wantReplicas {
				t.Errorf("replicas = %d, want %d", got, tc.wantReplicas)
			}
			if got := d.Spec.Selector.MatchLabels; len(got) != 1 || got[AppLabel] != tc.app.Name || len(d.Spec.Selector.MatchExpressions) != 0 {
				t.Errorf("selector = %+v, want %s=%s", d.Spec.Selector, AppLabel, tc.app.Name)
			}
			// The pods carry the children's labels, and not Helm's and Argo
			// CD's instance label.
			want := map[string]string{NameLabel: tc.app.Name, AppLabel: tc.app.Name, controller.ManagedByLabel: controller.ManagedByValue}
			if got := d.Spec.Template.Labels; !maps.Equal(got, want) {
				t.Errorf("pod labels = %v, want %v", got, want)
			}
			cs := d.Spec.Template.Spec.Containers
			if len(cs) != 1 || cs[0].Name != ContainerName || cs[0].Image != tc.app.Spec.Image {
				t.Fatalf("containers = %+v", cs)
			}
			if p := cs[0].Ports; len(p) != 1 || p[0].ContainerPort != tc.wantPort || p[0].Protocol != corev1.ProtocolTCP {
				t.Errorf("ports = %+v, want %d/TCP", p, tc.wantPort)
			}
			// Unset, the pull policy is left to the server's default.
			if cs[0].ImagePullPolicy != tc.wantPullPolicy {
				t.Errorf("imagePullPolicy = %q, want %q", cs[0].ImagePullPolicy, tc.wantPullPolicy)
			}
			// Fields the controller does not set stay unset, so that server
			// defaults are never fought over.
			if d.Spec.Strategy.Type != "" || d.Spec.RevisionHistoryLimit != nil {
				t.Errorf("desired Deployment sets fields the controller does not own: %+v", d.Spec)
			}
		})
	}
}

func withPullPolicy(p corev1.PullPolicy) func(*appv1.App) {
	return func(a *appv1.App) { a.Spec.ImagePullPolicy = p }
}

// The drift comparison sees a changed pull policy, and does not see the
// server's default for an unset one as drift.
func TestDeploymentPullPolicyDrift(t *testing.T) {
	live := func(p corev1.PullPolicy) *appsv1.Deployment {
		d := mustTyped[appsv1.Deployment](t, desiredDeployment(testApp(), newSelectors(testApp())))
		d.Spec.Template.Spec.Containers[0].ImagePullPolicy = p // as the server defaults or a previous apply set it
		d.Spec.Template.Spec.Containers[0].TerminationMessagePath = corev1.TerminationMessagePathDefault
		return d
	}
	for _, tc := range []struct {
		name     string
		want     corev1.PullPolicy
		live     corev1.PullPolicy
		upToDate bool
	}{
		{name: "unset, server default IfNotPresent", want: "", live: corev1.PullIfNotPresent, upToDate: true},
		{name: "unset, server default Always", want: "", live: corev1.PullAlways, upToDate: true},
		{name: "unset after Never", want: "", live: corev1.PullNever, upToDate: true}, // without managedFields: not this manager's
		{name: "set as live", want: corev1.PullNever, live: corev1.PullNever, upToDate: true},
		{name: "changed", want: corev1.PullNever, live: corev1.PullIfNotPresent, upToDate: false},
		{name: "set over the default", want: corev1.PullIfNotPresent, live: corev1.PullAlways, upToDate: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := controller.UpToDate(desiredDeployment(testApp(withPullPolicy(tc.want)), newSelectors(testApp())), live(tc.live))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.upToDate {
				t.Errorf("UpToDate = %v, want %v", got, tc.upToDate)
			}
		})
	}
	// A policy this manager applied and no longer sets is drift: the apply
	// that follows gives it back to the server's default.
	applied := live(corev1.PullNever)
	entry, err := controller.AppliedEntry(desiredDeployment(testApp(withPullPolicy(corev1.PullNever)), newSelectors(testApp())))
	if err != nil {
		t.Fatal(err)
	}
	applied.ManagedFields = []metav1.ManagedFieldsEntry{entry}
	if got, err := controller.UpToDate(desiredDeployment(testApp(), newSelectors(testApp())), applied); err != nil || got {
		t.Errorf("unsetting an applied pull policy: UpToDate = %v, %v; want false", got, err)
	}
}

func TestDesiredService(t *testing.T) {
	for _, port := range []int32{80, 8080} {
		app := testApp(func(a *appv1.App) { a.Spec.Port = port })
		s := mustTyped[corev1.Service](t, desiredService(app, newSelectors(app)))
		checkChildMeta(t, app, s)
		if s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.ClusterIP != "" {
			t.Errorf("type = %q, clusterIP = %q; want ClusterIP, unset", s.Spec.Type, s.Spec.ClusterIP)
		}
		if len(s.Spec.Selector) != 1 || s.Spec.Selector[AppLabel] != app.Name {
			t.Errorf("selector = %v", s.Spec.Selector)
		}
		want := corev1.ServicePort{Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0] != want {
			t.Errorf("ports = %+v, want %+v", s.Spec.Ports, want)
		}
	}
}

func TestDesiredIngress(t *testing.T) {
	cases := []struct {
		name      string
		opts      Options
		wantHost  string
		wantClass *string
		wantURL   string
	}{
		{name: "domain and class", opts: Options{IngressDomain: "apps.example.com", IngressClass: "nginx"},
			wantHost: "web.shop.apps.example.com", wantClass: ptr.To("nginx"), wantURL: "http://web.shop.apps.example.com/"},
		{name: "dots around the domain", opts: Options{IngressDomain: ".apps.example.com."},
			wantHost: "web.shop.apps.example.com", wantURL: "http://web.shop.apps.example.com/"},
		{name: "no class: the cluster default", opts: Options{IngressDomain: "apps.example.com"},
			wantHost: "web.shop.apps.example.com", wantURL: "http://web.shop.apps.example.com/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := testApp()
			ing := mustTyped[networkingv1.Ingress](t, desiredIngress(app, tc.opts))
			checkChildMeta(t, app, ing)
			if len(ing.Spec.Rules) != 1 {
				t.Fatalf("rules = %+v", ing.Spec.Rules)
			}
			rule := ing.Spec.Rules[0]
			if rule.Host != tc.wantHost {
				t.Errorf("host = %q, want %q", rule.Host, tc.wantHost)
			}
			if got, want := ptr.Deref(ing.Spec.IngressClassName, "<nil>"), ptr.Deref(tc.wantClass, "<nil>"); got != want {
				t.Errorf("class = %s, want %s", got, want)
			}
			path := rule.HTTP.Paths[0]
			if len(rule.HTTP.Paths) != 1 || path.Path != "/" || ptr.Deref(path.PathType, "") != networkingv1.PathTypePrefix {
				t.Errorf("paths = %+v, want / Prefix", rule.HTTP.Paths)
			}
			if b := path.Backend.Service; b == nil || b.Name != app.Name || b.Port.Number != app.Spec.Port {
				t.Errorf("backend = %+v, want %s:%d", b, app.Name, app.Spec.Port)
			}
			if got := ingressURL(ing); got != tc.wantURL {
				t.Errorf("URL = %q, want %q", got, tc.wantURL)
			}
		})
	}
}

// Live objects as the API server returns them: the desired fields plus
// server defaults and other writers' additions.
func liveDeployment(t *testing.T, app *appv1.App) *appsv1.Deployment {
	d := mustTyped[appsv1.Deployment](t, desiredDeployment(app, newSelectors(app)))
	d.ResourceVersion = "42"
	d.Labels["team"] = "shop"
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	c := &d.Spec.Template.Spec.Containers[0]
	c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.Resources.Limits = corev1.ResourceList{} // set by hand: not the controller's
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	d.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "envoy"})
	d.Status = appsv1.DeploymentStatus{Replicas: 3, AvailableReplicas: 1}
	return d
}

// upToDate reports whether the controller leaves live as it is.
func upToDate(t *testing.T, desired any, live runtime.Object) bool {
	t.Helper()
	ok, err := controller.UpToDate(desired, live)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A write is due when a field the controller sets drifted; entries others
// add to keyed lists are theirs.
func TestDeploymentDrift(t *testing.T) {
	app := testApp()
	cases := []struct {
		name      string
		edit      func(*appsv1.Deployment)
		wantWrite bool
	}{
		{name: "server defaults and others' fields", edit: func(*appsv1.Deployment) {}},
		{name: "image edited", edit: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "evil" }, wantWrite: true},
		{name: "scaled by hand", edit: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](7) }, wantWrite: true},
		{name: "label removed", edit: func(d *appsv1.Deployment) { delete(d.Labels, controller.ManagedByLabel) }, wantWrite: true},
		{name: "pod label changed", edit: func(d *appsv1.Deployment) { d.Spec.Template.Labels[NameLabel] = "x" }, wantWrite: true},
		{name: "container renamed", edit: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "main" }, wantWrite: true},
		{name: "container port edited", edit: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 9 }, wantWrite: true},
		// Another manager's entry of a keyed list is its own: kept.
		{name: "container port added", edit: func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := liveDeployment(t, app)
			tc.edit(live)
			if got := !upToDate(t, desiredDeployment(app, newSelectors(app)), live); got != tc.wantWrite {
				t.Errorf("write = %v, want %v", got, tc.wantWrite)
			}
		})
	}
}

func liveService(t *testing.T, app *appv1.App) *corev1.Service {
	s := mustTyped[corev1.Service](t, desiredService(app, newSelectors(app)))
	s.ResourceVersion = "7"
	s.Spec.ClusterIP = "10.96.0.12"
	s.Spec.ClusterIPs = []string{"10.96.0.12"}
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	s.Annotations = map[string]string{"note": "hand-added"}
	return s
}

func TestServiceDrift(t *testing.T) {
	app := testApp()
	cases := []struct {
		name      string
		edit      func(*corev1.Service)
		wantWrite bool
	}{
		{name: "server defaults and others' fields", edit: func(*corev1.Service) {}},
		{name: "target port edited", edit: func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http") }, wantWrite: true},
		{name: "selector edited", edit: func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "other"} }, wantWrite: true},
		{name: "selector extended (atomic map)", edit: func(s *corev1.Service) { s.Spec.Selector["tier"] = "web" }, wantWrite: true},
		{name: "type changed", edit: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, wantWrite: true},
		{name: "port edited", edit: func(s *corev1.Service) { s.Spec.Ports[0].Port = 9 }, wantWrite: true},
		// Another manager's entry of a keyed list is its own: kept.
		{name: "port added", edit: func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: 9090, Protocol: corev1.ProtocolTCP})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := liveService(t, app)
			tc.edit(live)
			if got := !upToDate(t, desiredService(app, newSelectors(app)), live); got != tc.wantWrite {
				t.Errorf("write = %v, want %v", got, tc.wantWrite)
			}
		})
	}
}

func TestIngressDrift(t *testing.T) {
	app := testApp()
	withClass := Options{IngressDomain: "apps.example.com", IngressClass: "nginx"}
	noClass := Options{IngressDomain: "apps.example.com"}
	cases := []struct {
		name      string
		opts      Options
		edit      func(*networkingv1.Ingress)
		wantDrift bool
	}{
		{name: "others' labels and annotations", opts: withClass, edit: func(i *networkingv1.Ingress) {
			i.Labels["team"] = "shop"
			i.Annotations = map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/"}
		}},
		{name: "class defaulted by admission", opts: noClass, edit: func(i *networkingv1.Ingress) { i.Spec.IngressClassName = ptr.To("default") }},
		{name: "class changed", opts: withClass, edit: func(i *networkingv1.Ingress) { i.Spec.IngressClassName = ptr.To("traefik") }, wantDrift: true},
		{name: "host edited", opts: withClass, edit: func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "hand.edited" }, wantDrift: true},
		{name: "rule added", opts: withClass, edit: func(i *networkingv1.Ingress) {
			i.Spec.Rules = append(i.Spec.Rules, networkingv1.IngressRule{Host: "other"})
		}, wantDrift: true},
		{name: "backend port edited", opts: withClass, edit: func(i *networkingv1.Ingress) {
			i.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Number = 1
		}, wantDrift: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := mustTyped[networkingv1.Ingress](t, desiredIngress(app, tc.opts))
			tc.edit(live)
			if got := !upToDate(t, desiredIngress(app, tc.opts), live); got != tc.wantDrift {
				t.Errorf("drifted = %v, want %v", got, tc.wantDrift)
			}
		})
	}
}

// Without a domain an App that asks for an Ingress gets none: it would have
// no host, and catch every request of its class.
func TestDesiredChildrenWithoutADomainHasNoIngress(t *testing.T) {
	app := testApp()
	if _, _, ing, err := DesiredChildren(app, Options{}); err != nil || ing != nil {
		t.Errorf("DesiredChildren without a domain: Ingress %+v, error %v; want none", ing, err)
	}
	if _, _, ing, err := DesiredChildren(app, Options{IngressDomain: "apps.example.com"}); err != nil || ing == nil || ing.Spec.Rules[0].Host != "web.shop.apps.example.com" {
		t.Errorf("DesiredChildren with a domain: Ingress %+v, error %v; want host web.shop.apps.example.com", ing, err)
	}
}
