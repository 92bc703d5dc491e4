package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/apis/app/conversion"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
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
type Validator struct{}

// invertEnableIngress applies the design notes' inversion of enable_ingress
// to an App being created through v1beta1, once: the decision is recorded in
// EnableIngressRequestedAnnotation, and an App that carries it is left
// alone. It returns the warning that tells the user, or "" when it did
// nothing.
func invertEnableIngress(app *appv1beta1.App, op admissionv1.Operation, requestVersion string, opts AdmissionOptions) string {
	if !opts.InvertEnableIngress || op != admissionv1.Create || requestVersion != appv1beta1.SchemeGroupVersion.Version {
		return ""
	}
	if _, decided := app.Annotations[appv1beta1.EnableIngressRequestedAnnotation]; decided {
		return ""
	}
	requested := app.Spec.EnableIngress
	if app.Annotations == nil {
		app.Annotations = map[string]string{}
	}
	app.Annotations[appv1beta1.EnableIngressRequestedAnnotation] = strconv.FormatBool(requested)
	app.Spec.EnableIngress = !requested
	return fmt.Sprintf("spec.enable_ingress was set to %t, the inverse of the %t requested, as the design notes' defaulting webhook specifies; "+
		"annotation %s keeps the requested value, and the manager's --app-invert-enable-ingress=false turns the inversion off",
		!requested, requested, appv1beta1.EnableIngressRequestedAnnotation)
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
	return errs, warnings
}

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
	if req.RequestKind != nil {
		return req.RequestKind.Version
	}
	return req.Kind.Version
}

// Admit sets enable_ingress to the inverse of the requested value on an App
// created through v1beta1, when the options say so, and patches nothing
// otherwise.
func (d Defaulter) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Kind.Version != appv1beta1.SchemeGroupVersion.Version || req.Operation != admissionv1.Create {
		return resp // the inversion is v1beta1's, at creation only
	}
	app, err := decodeApp(req.Object.Raw)
	if err != nil {
		return errored(apierrors.NewBadRequest(fmt.Sprintf("decoding the App: %v", err)))
	}
	hadAnnotations := app.Annotations != nil
	warning := invertEnableIngress(app, req.Operation, requestVersion(req), d.Options)
	if warning == "" {
		return resp
	}
	klog.FromContext(ctx).V(2).Info("Inverted enable_ingress", "app", klog.KRef(req.Namespace, app.Name), "enableIngress", app.Spec.EnableIngress)
	patch, err := json.Marshal(inversionPatch(app, hadAnnotations))
	if err != nil {
		return errored(apierrors.NewInternalError(err))
	}
	resp.Patch = patch
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	resp.Warnings = []string{warning}
	return resp
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// inversionPatch writes the inverted enable_ingress and the annotation that
// records the decision. "add" replaces a member that exists.
func inversionPatch(app *appv1beta1.App, hadAnnotations bool) []jsonPatchOp {
	key := appv1beta1.EnableIngressRequestedAnnotation
	ops := []jsonPatchOp{{Op: "add", Path: "/spec/enable_ingress", Value: app.Spec.EnableIngress}}
	if hadAnnotations {
		return append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapeJSONPointer(key), Value: app.Annotations[key]})
	}
	return append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{key: app.Annotations[key]}})
}

func escapeJSONPointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// Admit rejects an App that breaks a rule, with every reason, and warns
// about an image that may change under it.
func (Validator) Admit(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	}
	app, err := decodeApp(req.Object.Raw)
	if err != nil {
		return errored(apierrors.NewBadRequest(fmt.Sprintf("decoding the App: %v", err)))
	}
	var old *appv1beta1.App
	if req.Operation == admissionv1.Update {
		if old, err = decodeApp(req.OldObject.Raw); err != nil {
			return errored(apierrors.NewBadRequest(fmt.Sprintf("decoding the old App: %v", err)))
		}
	}
	errs, warnings := validateApp(app, old)
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: len(errs) == 0, Warnings: warnings}
	if len(errs) > 0 {
		status := apierrors.NewInvalid(appv1beta1.Kind("App"), app.Name, errs).ErrStatus
		resp.Result = &status
	}
	return resp
}

// errored is the response to a request that could not be decided.
func errored(err *apierrors.StatusError) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &err.ErrStatus}
}
