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

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

var conversionReviewGVK = apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview")

// conversionEndpoint serves one CRD's conversion webhook.
type conversionEndpoint struct {
	name      string
	converter Converter
}

func (e *conversionEndpoint) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	code := http.StatusOK
	defer func() { observe(e.name, code, start) }()

	body, code, err := readReview(w, req)
	if err != nil {
		code = writeError(w, req, e.name, code, err)
		return
	}
	review, err := decodeConversionReview(body)
	if err != nil {
		code = writeError(w, req, e.name, http.StatusBadRequest, err)
		return
	}

	r := review.Request
	logger := klog.FromContext(req.Context()).WithValues("webhook", e.name, "uid", r.UID, "to", r.DesiredAPIVersion)
	ctx := klog.NewContext(req.Context(), logger)

	resp := &apiextensionsv1.ConversionResponse{UID: r.UID}
	converted, err := e.convertAll(ctx, r.Objects, r.DesiredAPIVersion)
	if err != nil {
		conversionErrorsTotal.WithLabelValues(e.name).Inc()
		errorsTotal.WithLabelValues(e.name).Inc()
		logger.Error(err, "Conversion failed", "objects", len(r.Objects))
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.Result = metav1.Status{Status: metav1.StatusSuccess}
		resp.ConvertedObjects = converted
		logger.V(4).Info("Converted", "objects", len(converted))
	}
	code = writeJSON(w, &apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: conversionReviewGVK.GroupVersion().String(), Kind: conversionReviewGVK.Kind},
		Response: resp,
	})
}

// convertAll converts every object or fails as a whole: the API server
// needs all of them or an error, never a partial answer.
func (e *conversionEndpoint) convertAll(ctx context.Context, objects []runtime.RawExtension, to string) ([]runtime.RawExtension, error) {
	converted := make([]runtime.RawExtension, 0, len(objects))
	for i, raw := range objects {
		out, err := e.convertOne(ctx, raw.Raw, to)
		if err != nil {
			return nil, fmt.Errorf("object %d of %d: %w", i+1, len(objects), err)
		}
		converted = append(converted, runtime.RawExtension{Raw: out})
	}
	return converted, nil
}

func (e *conversionEndpoint) convertOne(ctx context.Context, raw []byte, to string) (out []byte, err error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	desc := describe(obj)
	if obj.GetAPIVersion() == to {
		return raw, nil // already in the requested version
	}
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("panic: %v", p), "Converter panicked", "object", desc)
			out, err = nil, fmt.Errorf("converting %s to %s: internal error in webhook %s", desc, to, e.name)
		}
	}()
	result, err := e.converter.Convert(ctx, obj, to)
	if err != nil {
		return nil, fmt.Errorf("converting %s to %s: %w", desc, to, err)
	}
	if result == nil {
		return nil, fmt.Errorf("converting %s to %s: converter returned nothing", desc, to)
	}
	if result.GetAPIVersion() != to || result.GetKind() != obj.GetKind() {
		return nil, fmt.Errorf("converting %s to %s: converter returned apiVersion %q kind %q", desc, to, result.GetAPIVersion(), result.GetKind())
	}
	if out, err = result.MarshalJSON(); err != nil {
		return nil, fmt.Errorf("encoding %s as %s: %w", desc, to, err)
	}
	return out, nil
}

// describe names an object in an error message: kind apiVersion namespace/name.
func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %s %s", obj.GetKind(), obj.GetAPIVersion(), name)
}

func decodeConversionReview(body []byte) (*apiextensionsv1.ConversionReview, error) {
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decoding the ConversionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != conversionReviewGVK {
		return nil, fmt.Errorf("expected %s, got apiVersion %q kind %q", conversionReviewGVK, review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("ConversionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, errors.New("ConversionReview request has no uid")
	}
	if review.Request.DesiredAPIVersion == "" {
		return nil, errors.New("ConversionReview request has no desiredAPIVersion")
	}
	return &review, nil
}
