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
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
)

func betaApp(name string, service, ingress bool, annotations map[string]string) *appv1beta1.App {
	return &appv1beta1.App{
		TypeMeta:   metav1.TypeMeta{APIVersion: appv1beta1.SchemeGroupVersion.String(), Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
		Spec: appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](3), Port: 80,
			EnableService: service, EnableIngress: ingress},
	}
}

func request(t *testing.T, op admissionv1.Operation, requestVersion string, obj, old runtime.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return &admissionv1.AdmissionRequest{
		UID:         "uid",
		Kind:        metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		RequestKind: &metav1.GroupVersionKind{Group: gvk.Group, Version: requestVersion, Kind: gvk.Kind},
		Operation:   op,
		Namespace:   "default",
		Object:      raw(obj),
		OldObject:   raw(old),
	}
}

// applyPatch applies a response's JSON patch to the request's object.
func applyPatch(t *testing.T, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) *appv1beta1.App {
	t.Helper()
	data := req.Object.Raw
	if resp.Patch != nil {
		if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("decoding the patch %s: %v", resp.Patch, err)
		}
		if data, err = patch.Apply(data); err != nil {
			t.Fatalf("applying the patch %s: %v", resp.Patch, err)
		}
	}
	out := &appv1beta1.App{}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDefaulter(t *testing.T) {
	requested := appv1beta1.EnableIngressRequestedAnnotation
	cases := []struct {
		name           string
		op             admissionv1.Operation
		requestVersion string
		in             *appv1beta1.App
		invert         bool
		wantIngress    bool
		wantAnnotation string // "" for none
		wantWarning    bool
	}{
		{"notes' sample: false becomes true", admissionv1.Create, "v1beta1", betaApp("app-sample", true, false, nil), true, true, "false", true},
		{"webhook case: false becomes true", admissionv1.Create, "v1beta1", betaApp("app-sample", false, false, map[string]string{"team": "a"}), true, true, "false", true},
		{"true becomes false", admissionv1.Create, "v1beta1", betaApp("a", true, true, nil), true, false, "true", true},
		{"already decided: unchanged", admissionv1.Create, "v1beta1", betaApp("a", true, true, map[string]string{requested: "false"}), true, true, "false", false},
		{"update without a decision: not inverted", admissionv1.Update, "v1beta1", betaApp("a", true, false, nil), true, false, "", false},
		{"update writing the created value again: the decision stays", admissionv1.Update, "v1beta1", betaApp("a", true, false, map[string]string{requested: "false"}), true, true, "false", true},
		{"update writing the created value through v1: taken as written", admissionv1.Update, "v1", betaApp("a", true, false, map[string]string{requested: "false"}), true, false, "false", false},
		{"created through v1: not inverted", admissionv1.Create, "v1", betaApp("a", true, false, nil), true, false, "", false},
		{"inversion off", admissionv1.Create, "v1beta1", betaApp("a", true, false, nil), false, false, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Defaulter{Options: AdmissionOptions{InvertEnableIngress: tc.invert}}
			var old runtime.Object
			if tc.op == admissionv1.Update {
				// The stored App: created from the same manifest, inverted.
				stored := tc.in.DeepCopy()
				if r, ok := stored.Annotations[requested]; ok {
					stored.Spec.EnableIngress = r != "true"
				}
				old = stored
			}
			req := request(t, tc.op, tc.requestVersion, tc.in, old)
			resp := d.Admit(context.Background(), req)
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			out := applyPatch(t, req, resp)
			if out.Spec.EnableIngress != tc.wantIngress {
				t.Errorf("enable_ingress = %v, want %v", out.Spec.EnableIngress, tc.wantIngress)
			}
			if got := out.Annotations[requested]; got != tc.wantAnnotation {
				t.Errorf("annotation %s = %q, want %q", requested, got, tc.wantAnnotation)
			}
			for k, v := range tc.in.Annotations {
				if out.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q kept", k, out.Annotations[k], v)
				}
			}
			if got := len(resp.Warnings) > 0; got != tc.wantWarning {
				t.Errorf("warnings %q, want some: %v", resp.Warnings, tc.wantWarning)
			}

			// Idempotent: the webhook's own output, admitted again (a
			// reinvocation of the same request) or as the next update, is
			// left as it is.
			for _, op := range []admissionv1.Operation{tc.op, admissionv1.Update} {
				again := request(t, op, tc.requestVersion, out, out)
				resp := d.Admit(context.Background(), again)
				if resp.Patch != nil || len(resp.Warnings) > 0 {
					t.Errorf("%s of the webhook's output patched %s, warned %q; want nothing", op, resp.Patch, resp.Warnings)
				}
			}
		})
	}
}

// A v1 object sent to the webhook (if it were configured for v1 too) is
// left alone: the inversion belongs to v1beta1.
func TestDefaulterIgnoresV1(t *testing.T) {
	obj := &appv1.App{
		TypeMeta:   metav1.TypeMeta{APIVersion: appv1.SchemeGroupVersion.String(), Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec:       appv1.AppSpec{Image: "nginx:1.27", Exposure: appv1.ExposureService},
	}
	resp := Defaulter{Options: DefaultAdmissionOptions()}.Admit(context.Background(), request(t, admissionv1.Create, "v1", obj, nil))
	if !resp.Allowed || resp.Patch != nil {
		t.Errorf("allowed %v, patch %s; want allowed without a patch", resp.Allowed, resp.Patch)
	}
}

func TestValidator(t *testing.T) {
	withImage := func(app *appv1beta1.App, image string) *appv1beta1.App { app.Spec.Image = image; return app }
	withPullPolicy := func(app *appv1beta1.App, p corev1.PullPolicy) *appv1beta1.App {
		app.Spec.ImagePullPolicy = p
		return app
	}
	inverted := map[string]string{appv1beta1.EnableIngressRequestedAnnotation: "false"}
	cases := []struct {
		name     string
		op       admissionv1.Operation
		app, old *appv1beta1.App
		// wantDenied are substrings of the denial; nil means allowed.
		wantDenied  []string
		wantWarning string
	}{
		{name: "valid", app: betaApp("web", true, true, nil)},
		{name: "ingress without service", app: betaApp("web", false, true, nil),
			wantDenied: []string{"spec.enable_ingress", "enable_ingress requires enable_service to be true"}},
		{name: "inverted ingress without service says why", app: betaApp("app-sample", false, true, inverted),
			wantDenied: []string{"spec.enable_ingress", "enable_ingress requires enable_service", "defaulting webhook inverted the false requested"}},
		{name: "name with a dot", app: betaApp("web.v2", true, false, nil),
			wantDenied: []string{"metadata.name", "DNS-1035 label"}},
		{name: "name starting with a digit", app: betaApp("1web", true, false, nil),
			wantDenied: []string{"metadata.name", "DNS-1035 label"}},
		{name: "name of 64 characters", app: betaApp(strings.Repeat("a", 64), true, false, nil),
			wantDenied: []string{"metadata.name", "must be no more than 63 characters"}},
		{name: "update keeps a name created before the rule", op: admissionv1.Update,
			app: betaApp("1web", true, false, nil), old: betaApp("1web", true, false, nil)},
		{name: "image with upper case", app: withImage(betaApp("web", true, false, nil), "NGINX:1.27"),
			wantDenied: []string{"spec.image", "not a valid image reference"}},
		{name: "image with a space", app: withImage(betaApp("web", true, false, nil), "nginx 1.27"),
			wantDenied: []string{"spec.image", "not a valid image reference"}},
		{name: "image with a bad tag", app: withImage(betaApp("web", true, false, nil), "nginx:-1"),
			wantDenied: []string{"spec.image", "not a valid image reference"}},
		{name: "every reason at once", app: withImage(betaApp("Web", false, true, nil), "nginx::"),
			wantDenied: []string{"metadata.name", "spec.enable_ingress", "spec.image"}},
		{name: "no tag warns", app: withImage(betaApp("web", true, false, nil), "nginx"),
			wantWarning: `spec.image: "nginx" has no tag`},
		{name: "latest warns", app: withImage(betaApp("web", true, false, nil), "registry.example.com:5000/team/nginx:latest"),
			wantWarning: "uses the tag latest"},
		{name: "digest does not warn", app: withImage(betaApp("web", true, false, nil),
			"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")},
		{name: "unchanged image is not warned about again", op: admissionv1.Update,
			app: withImage(betaApp("web", true, false, nil), "nginx"), old: withImage(betaApp("web", true, false, nil), "nginx")},
		{name: "pull policy IfNotPresent", app: withPullPolicy(betaApp("web", true, false, nil), corev1.PullIfNotPresent)},
		{name: "pull policy Never", app: withPullPolicy(betaApp("web", true, false, nil), corev1.PullNever)},
		{name: "pull policy Always", app: withPullPolicy(betaApp("web", true, false, nil), corev1.PullAlways)},
		{name: "pull policy not in the enum", app: withPullPolicy(betaApp("web", true, false, nil), "ifnotpresent"),
			wantDenied: []string{"spec.imagePullPolicy", `Unsupported value: "ifnotpresent"`, `"Always", "IfNotPresent", "Never"`}},
		{name: "pull policy changed to a value not in the enum", op: admissionv1.Update,
			app: withPullPolicy(betaApp("web", true, false, nil), "Sometimes"), old: withPullPolicy(betaApp("web", true, false, nil), corev1.PullNever),
			wantDenied: []string{"spec.imagePullPolicy", `Unsupported value: "Sometimes"`}},
		{name: "update keeps a pull policy stored before the rule", op: admissionv1.Update,
			app: withPullPolicy(betaApp("web", true, false, nil), "Sometimes"), old: withPullPolicy(betaApp("web", true, false, nil), "Sometimes")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			var old runtime.Object
			if tc.old != nil {
				old = tc.old
			}
			resp := Validator{}.Admit(context.Background(), request(t, op, "v1beta1", tc.app, old))
			if tc.wantDenied == nil {
				if !resp.Allowed {
					t.Fatalf("denied: %s", resp.Result.Message)
				}
			} else {
				if resp.Allowed {
					t.Fatalf("allowed; want denied with %q", tc.wantDenied)
				}
				if resp.Result.Code != 422 || resp.Result.Reason != metav1.StatusReasonInvalid {
					t.Errorf("code %d reason %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
				}
				for _, w := range tc.wantDenied {
					if !strings.Contains(resp.Result.Message, w) {
						t.Errorf("message %q does not contain %q", resp.Result.Message, w)
					}
				}
			}
			warnings := strings.Join(resp.Warnings, "\n")
			if tc.wantWarning == "" && warnings != "" {
				t.Errorf("warnings %q, want none", warnings)
			}
			if tc.wantWarning != "" && !strings.Contains(warnings, tc.wantWarning) {
				t.Errorf("warnings %q do not contain %q", warnings, tc.wantWarning)
			}
		})
	}
}

// The validator reads a v1 App too, through the conversion.
func TestValidatorReadsV1(t *testing.T) {
	obj := &appv1.App{
		TypeMeta:   metav1.TypeMeta{APIVersion: appv1.SchemeGroupVersion.String(), Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: "web.v1"},
		Spec:       appv1.AppSpec{Image: "nginx:1.27", Exposure: appv1.ExposureIngress},
	}
	resp := Validator{}.Admit(context.Background(), request(t, admissionv1.Create, "v1", obj, nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "metadata.name") {
		t.Errorf("allowed %v, result %v; want denied for the name", resp.Allowed, resp.Result)
	}
}
