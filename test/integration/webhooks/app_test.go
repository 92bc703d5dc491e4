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

package webhooks

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const requestedAnnotation = appv1beta1.EnableIngressRequestedAnnotation

// The design notes' App sample applies unchanged with kubectl: the defaulting
// webhook turns enable_ingress false into true, says so in a warning and an
// annotation, the validating webhook warns about :latest, and the App
// converges with an Ingress. Their webhook case (enable_service false too)
// becomes enable_ingress true and is then rejected, with the reason.
func TestAppSeedSamples(t *testing.T) {
	setup(t)
	ctx := context.Background()
	if err := cp.CreateFakeNodes(ctx, "app-node-1"); err != nil {
		t.Fatal(err)
	}
	framework.StartManager(t, cp.Config, func(o *optionsT) { o.Generic.Controllers = []string{"app"} })

	ns := framework.CreateNamespace(t, cp.Client)
	_, stderr, err := kubectl(t, "apply", "-n", ns, "-f", sample(t, "design-notes/app-v1beta1.yaml"))
	if err != nil {
		t.Fatalf("kubectl apply of the notes' App sample failed: %v", err)
	}
	for _, want := range []string{"Warning: spec.enable_ingress was set to true, the inverse of the false requested", "uses the tag latest"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("kubectl printed %q; want a warning containing %q", stderr, want)
		}
	}
	app := getApp(t, ns, "app-sample")
	if !app.Spec.EnableIngress || !app.Spec.EnableService || app.Annotations[requestedAnnotation] != "false" {
		t.Errorf("enable_ingress %v, enable_service %v, annotation %q; want true, true, \"false\"",
			app.Spec.EnableIngress, app.Spec.EnableService, app.Annotations[requestedAnnotation])
	}
	framework.Eventually(t, timeout, "the App sample to be Ready with an Ingress", func(ctx context.Context) (bool, error) {
		app := getApp(t, ns, "app-sample")
		ready := false
		for _, c := range app.Status.Conditions {
			ready = ready || (c.Type == appv1beta1.ConditionReady && c.Status == metav1.ConditionTrue)
		}
		if !ready {
			return false, nil
		}
		_, err := cp.Client.NetworkingV1().Ingresses(ns).Get(ctx, "app-sample", metav1.GetOptions{})
		return err == nil, nil
	})

	// Applying the same file again changes nothing: the decision was made at
	// creation, and the update neither flips enable_ingress nor warns about it.
	before := getApp(t, ns, "app-sample")
	_, stderr, err = kubectl(t, "apply", "-n", ns, "-f", sample(t, "design-notes/app-v1beta1.yaml"))
	if err != nil {
		t.Fatalf("applying the sample again: %v", err)
	}
	if strings.Contains(stderr, "inverse") {
		t.Errorf("the second apply warned about an inversion: %s", stderr)
	}
	after := getApp(t, ns, "app-sample")
	if !after.Spec.EnableIngress || after.Generation != before.Generation {
		t.Errorf("after a second apply: enable_ingress %v, generation %d (was %d); want true, unchanged",
			after.Spec.EnableIngress, after.Generation, before.Generation)
	}

	// The webhook case, in another namespace since it has the same name.
	ns2 := framework.CreateNamespace(t, cp.Client)
	_, stderr, err = kubectl(t, "apply", "-n", ns2, "-f", sample(t, "design-notes/app-webhook-case.yaml"))
	if err == nil {
		t.Fatal("kubectl apply of the notes' webhook case succeeded; want it rejected")
	}
	for _, want := range []string{"enable_ingress requires enable_service to be true", "inverse of the false requested"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("kubectl printed %q; want it to contain %q", stderr, want)
		}
	}
	if _, err := dyn.Resource(appsV1beta1).Namespace(ns2).Get(ctx, "app-sample", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the rejected App exists: %v", err)
	}
}

func getApp(t *testing.T, ns, name string) *appv1beta1.App {
	t.Helper()
	u, err := dyn.Resource(appsV1beta1).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting App %s/%s: %v", ns, name, err)
	}
	app := &appv1beta1.App{}
	if err := fromUnstructured(u, app); err != nil {
		t.Fatal(err)
	}
	return app
}

// appObject is an App as a client writes it.
func appObject(version, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ingress.example.com/" + version, "kind": "App",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

// Every rejection and warning of the App webhooks, through the API server.
func TestAppAdmission(t *testing.T) {
	setup(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	c := newWarningsClient(t)

	cases := []struct {
		name    string
		version string
		objName string
		spec    map[string]any
		// wantErr are substrings of the rejection; nil means admitted.
		wantErr      []string
		wantWarnings []string
	}{{
		name: "name not a DNS-1035 label", version: "v1beta1", objName: "web.v2",
		spec:         map[string]any{"image": "nginx:1.27", "enable_service": true},
		wantErr:      []string{"metadata.name", "DNS-1035 label"},
		wantWarnings: []string{"spec.enable_ingress was set to true, the inverse of the false requested"},
	}, {
		name: "name starting with a digit, through v1", version: "v1", objName: "1web",
		spec:    map[string]any{"image": "nginx:1.27"},
		wantErr: []string{"metadata.name", "DNS-1035 label"},
	}, {
		name: "image that does not parse", version: "v1beta1", objName: "bad-image",
		spec:         map[string]any{"image": "NGINX:1.27", "enable_service": true, "enable_ingress": true},
		wantErr:      []string{"spec.image", "not a valid image reference"},
		wantWarnings: []string{"spec.enable_ingress was set to false, the inverse of the true requested"},
	}, {
		name: "image that does not parse, through v1", version: "v1", objName: "bad-image-v1",
		spec:    map[string]any{"image": "nginx:1.27:2", "exposure": "Service"},
		wantErr: []string{"spec.image", "not a valid image reference"},
	}, {
		name: "inverted to an Ingress without a Service", version: "v1beta1", objName: "no-service",
		spec:         map[string]any{"image": "nginx:1.27", "enable_service": false, "enable_ingress": false},
		wantErr:      []string{"enable_ingress requires enable_service to be true"},
		wantWarnings: []string{"spec.enable_ingress was set to true, the inverse of the false requested"},
	}, {
		name: "no tag warns", version: "v1beta1", objName: "no-tag",
		spec: map[string]any{"image": "nginx", "enable_service": true},
		wantWarnings: []string{`spec.image: "nginx" has no tag`,
			"spec.enable_ingress was set to true"},
	}, {
		name: "latest warns, through v1 without an inversion", version: "v1", objName: "latest-v1",
		spec:         map[string]any{"image": "registry.example.com/team/web:latest", "exposure": "Ingress"},
		wantWarnings: []string{"uses the tag latest"},
	}, {
		name: "digest does not warn", version: "v1", objName: "digest",
		spec: map[string]any{"image": "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gvr := appsV1beta1
			if tc.version == "v1" {
				gvr = appsV1
			}
			c.take()
			_, err := c.Resource(gvr).Namespace(ns).Create(ctx, appObject(tc.version, tc.objName, tc.spec), strict)
			warnings := strings.Join(c.take(), "\n")
			t.Logf("error: %v\nwarnings: %s", err, warnings)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("admitted; want rejected with %q", tc.wantErr)
			case tc.wantErr != nil && !apierrors.IsInvalid(err):
				t.Errorf("error %v is not Invalid (422)", err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, w := range tc.wantWarnings {
				if !strings.Contains(warnings, w) {
					t.Errorf("warnings %q do not contain %q", warnings, w)
				}
			}
			if len(tc.wantWarnings) == 0 && warnings != "" {
				t.Errorf("warnings %q, want none", warnings)
			}
		})
	}
}

// The inversion happens once: updates through either version, and a patch
// that touches enable_ingress, leave it as the user last wrote it.
func TestAppInversionDecidedOnce(t *testing.T) {
	setup(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	c := newWarningsClient(t)
	apps := c.Resource(appsV1beta1).Namespace(ns)

	if _, err := apps.Create(ctx, appObject("v1beta1", "once", map[string]any{
		"image": "nginx:1.27", "enable_service": true, "enable_ingress": false,
	}), strict); err != nil {
		t.Fatal(err)
	}
	if w := c.take(); len(w) != 1 || !strings.Contains(w[0], "inverse") {
		t.Errorf("create warned %q; want the inversion", w)
	}
	app := getApp(t, ns, "once")
	if !app.Spec.EnableIngress || app.Annotations[requestedAnnotation] != "false" {
		t.Fatalf("after create: enable_ingress %v, annotation %q; want true, \"false\"", app.Spec.EnableIngress, app.Annotations[requestedAnnotation])
	}

	// An update of another field.
	if _, err := apps.Patch(ctx, "once", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if app := getApp(t, ns, "once"); !app.Spec.EnableIngress {
		t.Errorf("an update of replicas flipped enable_ingress to false")
	}
	// Writing again the value the App was created with (what kubectl apply
	// of the same manifest does) keeps the decision, and says so.
	if _, err := apps.Patch(ctx, "once", types.MergePatchType, []byte(`{"spec":{"enable_ingress":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if app := getApp(t, ns, "once"); !app.Spec.EnableIngress {
		t.Errorf("writing the created value false again flipped enable_ingress to false")
	}
	if w := c.take(); len(w) != 1 || !strings.Contains(w[0], "spec.enable_ingress stays true") {
		t.Errorf("warnings %q; want one saying enable_ingress stays true", w)
	}
	// Removing the annotation in the same update takes the value as written.
	if _, err := apps.Patch(ctx, "once", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+requestedAnnotation+`":null}},"spec":{"enable_ingress":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if app := getApp(t, ns, "once"); app.Spec.EnableIngress {
		t.Errorf("enable_ingress false with the annotation removed was not taken as written")
	}
	// An update of another field: nothing flips.
	if _, err := apps.Patch(ctx, "once", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if app := getApp(t, ns, "once"); app.Spec.EnableIngress {
		t.Errorf("an update of replicas flipped enable_ingress to true")
	}
	// An update through v1, converted for the webhooks.
	if _, err := c.Resource(appsV1).Namespace(ns).Patch(ctx, "once", types.MergePatchType, []byte(`{"spec":{"exposure":"Ingress"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if app := getApp(t, ns, "once"); !app.Spec.EnableIngress || !app.Spec.EnableService {
		t.Errorf("exposure Ingress through v1 reads as enable_service %v, enable_ingress %v", app.Spec.EnableService, app.Spec.EnableIngress)
	}
	if w := c.take(); len(w) > 0 {
		t.Errorf("updates warned %q", w)
	}

	// Created through v1: no inversion.
	if _, err := c.Resource(appsV1).Namespace(ns).Create(ctx, appObject("v1", "via-v1", map[string]any{
		"image": "nginx:1.27", "exposure": "Service",
	}), strict); err != nil {
		t.Fatal(err)
	}
	if app := getApp(t, ns, "via-v1"); app.Spec.EnableIngress || !app.Spec.EnableService || app.Annotations[requestedAnnotation] != "" {
		t.Errorf("created through v1 with exposure Service: enable_ingress %v, enable_service %v, annotation %q",
			app.Spec.EnableIngress, app.Spec.EnableService, app.Annotations[requestedAnnotation])
	}
}

// Reads of the same App through v1 and v1beta1 agree, whichever version it
// was written in.
func TestAppVersionsAgree(t *testing.T) {
	setup(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	for _, tc := range []struct {
		name     string
		obj      *unstructured.Unstructured
		beta, v1 map[string]any // expected specs
	}{{
		name: "written as v1beta1",
		obj: appObject("v1beta1", "beta", map[string]any{
			"image": "nginx:1.27", "replicas": int64(0), "enable_service": true, "enable_ingress": true,
		}),
		// inverted at creation: enable_ingress false
		beta: map[string]any{"image": "nginx:1.27", "replicas": int64(0), "port": int64(80), "enable_service": true, "enable_ingress": false},
		v1:   map[string]any{"image": "nginx:1.27", "replicas": int64(0), "port": int64(80), "exposure": "Service"},
	}, {
		name: "written as v1",
		obj:  appObject("v1", "one", map[string]any{"image": "nginx:1.27", "port": int64(8080), "exposure": "Ingress"}),
		// replicas unset stays unset in both versions: no default.
		beta: map[string]any{"image": "nginx:1.27", "port": int64(8080), "enable_service": true, "enable_ingress": true},
		v1:   map[string]any{"image": "nginx:1.27", "port": int64(8080), "exposure": "Ingress"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			gvr := appsV1beta1
			if tc.obj.GetAPIVersion() == "ingress.example.com/v1" {
				gvr = appsV1
			}
			if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, tc.obj, strict); err != nil {
				t.Fatal(err)
			}
			beta, err := dyn.Resource(appsV1beta1).Namespace(ns).Get(ctx, tc.obj.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			one, err := dyn.Resource(appsV1).Namespace(ns).Get(ctx, tc.obj.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := beta.Object["spec"]; !equalJSON(got, tc.beta) {
				t.Errorf("v1beta1 spec = %v, want %v", got, tc.beta)
			}
			if got := one.Object["spec"]; !equalJSON(got, tc.v1) {
				t.Errorf("v1 spec = %v, want %v", got, tc.v1)
			}
			if beta.GetUID() != one.GetUID() || beta.GetResourceVersion() != one.GetResourceVersion() ||
				!equalJSON(beta.GetLabels(), one.GetLabels()) || !equalJSON(beta.GetAnnotations(), one.GetAnnotations()) {
				t.Errorf("metadata differs between the versions:\n%v\n%v", beta.Object["metadata"], one.Object["metadata"])
			}
		})
	}
}
