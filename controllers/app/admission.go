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
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/apis/app/conversion"
	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// AdmissionOptions configures the App admission webhooks.
type AdmissionOptions struct {
	// InvertEnableIngress makes the defaulting webhook set enable_ingress to
	// the inverse of the value an App is created with, as the design notes
	// specify. On by default.
	InvertEnableIngress bool
}

// DefaultAdmissionOptions returns the defaults of the flags.
func DefaultAdmissionOptions() AdmissionOptions {
	return AdmissionOptions{InvertEnableIngress: true}
}

// Defaulter is the App defaulting (mutating) webhook.
type Defaulter struct {
	Options AdmissionOptions
}

// Validator is the App validating webhook.
type Validator struct {
	// Access checks that the requester may create the App's children
	// themselves (access.go); nil checks nothing.
	Access *webhook.AccessReviewer
}

// invertEnableIngress applies the design notes' inversion of enable_ingress
// to an App written through v1beta1. The decision is made once, at
// creation, and recorded in EnableIngressRequestedAnnotation: an App created
// with the annotation is left alone, and so is every update, but one. An
// update that writes again the value the App was created with, over the
// inverted value (kubectl apply of the same manifest sends it every time),
// keeps the inverted value, so that re-applying a manifest changes nothing.
// It returns the warning that tells the user, or "" when it did nothing.
func invertEnableIngress(app, old *appv1beta1.App, op admissionv1.Operation, requestVersion string, opts AdmissionOptions) string {
	if !opts.InvertEnableIngress || requestVersion != appv1beta1.SchemeGroupVersion.Version {
		return ""
	}
	key := appv1beta1.EnableIngressRequestedAnnotation
	recorded, decided := app.Annotations[key]
	switch op {
	case admissionv1.Create:
		if decided {
			return ""
		}
		requested := app.Spec.EnableIngress
		if app.Annotations == nil {
			app.Annotations = map[string]string{}
		}
		app.Annotations[key] = strconv.FormatBool(requested)
		app.Spec.EnableIngress = !requested
		return fmt.Sprintf("spec.enable_ingress was set to %t, the inverse of the %t requested, as the design notes' defaulting webhook specifies; "+
			"annotation %s keeps the requested value, and the manager's --app-invert-enable-ingress=false turns the inversion off",
			!requested, requested, key)
	case admissionv1.Update:
		requested, err := strconv.ParseBool(recorded)
		if !decided || err != nil || old == nil || old.Annotations[key] != recorded ||
			app.Spec.EnableIngress != requested || old.Spec.EnableIngress != !requested {
			return ""
		}
		app.Spec.EnableIngress = !requested
		return fmt.Sprintf("spec.enable_ingress stays %t: %t is the value this App was created with, which the defaulting webhook inverted then (annotation %s); "+
			"to set %t, remove that annotation in the same update", !requested, requested, key, requested)
	}
	return ""
}

// validateApp checks what the CRD schema cannot, or cannot say as clearly:
// the rules of an App, and the warnings for what is allowed but unwise. old
// is nil on create.
func validateApp(app, old *appv1beta1.App) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	if old == nil { // the name cannot change
		if msgs := validation.IsDNS1035Label(app.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), app.Name,
				"must be a DNS-1035 label, since it names the App's Service: "+strings.Join(msgs, "; ")))
		}
	}
	if app.Spec.EnableIngress && !app.Spec.EnableService {
		msg := "enable_ingress requires enable_service to be true: the Ingress routes to the App's Service"
		if requested, ok := app.Annotations[appv1beta1.EnableIngressRequestedAnnotation]; ok && requested != "true" {
			msg += fmt.Sprintf(" (enable_ingress is true because the defaulting webhook inverted the %s requested, as the design notes specify; see annotation %s)",
				requested, appv1beta1.EnableIngressRequestedAnnotation)
		}
		errs = append(errs, field.Invalid(field.NewPath("spec", "enable_ingress"), true, msg))
	}
	imagePath := field.NewPath("spec", "image")
	if old == nil || old.Spec.Image != app.Spec.Image {
		ref, err := reference.ParseNormalizedNamed(app.Spec.Image)
		if err != nil {
			errs = append(errs, field.Invalid(imagePath, app.Spec.Image, "not a valid image reference: "+err.Error()))
		} else {
			warnings = append(warnings, imageWarnings(imagePath, app.Spec.Image, ref)...)
		}
	}
	// The CRD's enum rejects the same values first; the webhook agrees with
	// it. An unchanged value is let be, as CRD validation ratcheting does.
	if p := app.Spec.ImagePullPolicy; p != "" && (old == nil || old.Spec.ImagePullPolicy != p) && !slices.Contains(pullPolicies, p) {
		errs = append(errs, field.NotSupported(field.NewPath("spec", "imagePullPolicy"), p, pullPolicies))
	}
	return errs, warnings
}

// pullPolicies are the values of spec.imagePullPolicy, as the CRD's enum
// lists them.
var pullPolicies = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}

// imageWarnings warns about an image that may change under the App: no tag
// (which means latest) or the tag latest, and no digest.
func imageWarnings(path *field.Path, image string, ref reference.Named) []string {
	if _, ok := ref.(reference.Digested); ok {
		return nil
	}
	tagged, ok := ref.(reference.Tagged)
	switch {
	case !ok:
		return []string{fmt.Sprintf("%s: %q has no tag, which means :latest; pin a version tag or a digest so that every pod runs the same image", path, image)}
	case tagged.Tag() == "latest":
		return []string{fmt.Sprintf("%s: %q uses the tag latest, which changes under you; pin a version tag or a digest so that every pod runs the same image", path, image)}
	}
	return nil
}

// decodeApp reads an App of either version from an admission request, as
// v1beta1.
func decodeApp(raw []byte) (*appv1beta1.App, error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, err
	}
	switch meta.APIVersion {
	case appv1beta1.SchemeGroupVersion.String():
		app := &appv1beta1.App{}
		return app, json.Unmarshal(raw, app)
	case appv1.SchemeGroupVersion.String():
		in := &appv1.App{}
		if err := json.Unmarshal(raw, in); err != nil {
			return nil, err
		}
		app := &appv1beta1.App{}
		return app, conversion.V1ToV1beta1(in, app)
	}
	return nil, fmt.Errorf("not an App: apiVersion %q, kind %q", meta.APIVersion, meta.Kind)
}

// requestVersion is the version the client wrote, which may differ from the
// version the webhook is sent (matchPolicy Equivalent).
func requestVersion(req *admissionv1.AdmissionRequest) string {
	return webhook.RequestVersion(req)
}

// Admit sets enable_ingress to the inverse of the requested value on an App
// created through v1beta1, when the options say so, and patches nothing
// otherwise.
func (d Defaulter) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Kind.Version != appv1beta1.SchemeGroupVersion.Version ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return webhook.Allowed() // the inversion is v1beta1's
	}
	app, err := decodeApp(req.Object.Raw)
	if err != nil {
		return webhook.Errored(http.StatusBadRequest, fmt.Errorf("decoding the App: %w", err))
	}
	var old *appv1beta1.App
	if req.Operation == admissionv1.Update {
		if old, err = decodeApp(req.OldObject.Raw); err != nil {
			return webhook.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old App: %w", err))
		}
	}
	hadAnnotations := app.Annotations != nil
	warning := invertEnableIngress(app, old, req.Operation, requestVersion(req), d.Options)
	if warning == "" {
		return webhook.Allowed()
	}
	klog.FromContext(ctx).V(2).Info("Inverted enable_ingress", "app", klog.KRef(req.Namespace, app.Name), "operation", req.Operation, "enableIngress", app.Spec.EnableIngress)
	return webhook.Patched(inversionPatch(app, hadAnnotations), warning)
}

// inversionPatch writes the inverted enable_ingress and the annotation that
// records the decision. "add" replaces a member that exists.
func inversionPatch(app *appv1beta1.App, hadAnnotations bool) []webhook.JSONPatchOp {
	key := appv1beta1.EnableIngressRequestedAnnotation
	ops := []webhook.JSONPatchOp{{Op: "add", Path: "/spec/enable_ingress", Value: app.Spec.EnableIngress}}
	if hadAnnotations {
		return append(ops, webhook.JSONPatchOp{Op: "add", Path: "/metadata/annotations/" + escapeJSONPointer(key), Value: app.Annotations[key]})
	}
	return append(ops, webhook.JSONPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{key: app.Annotations[key]}})
}

func escapeJSONPointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// Admit rejects an App that breaks a rule, or whose children the requester
// may not create themselves, with every reason, and warns about an image
// that may change under it.
func (v Validator) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return webhook.Allowed()
	}
	app, err := decodeApp(req.Object.Raw)
	if err != nil {
		return webhook.Errored(http.StatusBadRequest, fmt.Errorf("decoding the App: %w", err))
	}
	var old *appv1beta1.App
	if req.Operation == admissionv1.Update {
		if old, err = decodeApp(req.OldObject.Raw); err != nil {
			return webhook.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old App: %w", err))
		}
	}
	errs, warnings := validateApp(app, old)
	errs = append(errs, v.accessErrors(ctx, req.UserInfo, req.Namespace, app, old)...)
	if requestVersion(req) == appv1beta1.SchemeGroupVersion.Version {
		// Through v1 the conversion wrote them; through v1beta1 a user did.
		var oldAnnotations map[string]string
		if old != nil {
			oldAnnotations = old.Annotations
		}
		errs = append(errs, webhook.ReservedAnnotationWrites(conversion.ReservedAnnotations.Keys(), app.Annotations, oldAnnotations,
			"the conversion between v1beta1 and v1")...)
	}
	if len(errs) > 0 {
		return webhook.Invalid(appv1beta1.Kind("App"), app.Name, errs, warnings...)
	}
	return webhook.Allowed(warnings...)
}
