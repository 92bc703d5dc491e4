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

package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// CreatedAnnotation holds a hash of the apply configuration a child was
// created from. A Create leaves its fields, server defaults included, to an
// "Update" managedFields entry, which cannot tell a field this manager set
// from a default: the hash says whether the desired fields changed since,
// until the first apply moves the child to an "Apply" entry and drops it.
const CreatedAnnotation = "controller-manager.ndsl.cn/created-from"

// Typed converts an apply configuration into the object it describes, with
// exactly the fields it sets.
func Typed[T any](applyConfiguration any) (*T, error) {
	obj := new(T)
	if err := viaJSON(applyConfiguration, obj); err != nil {
		return nil, fmt.Errorf("converting the apply configuration into %T: %w", obj, err)
	}
	return obj, nil
}

// viaJSON sets out to in's JSON encoding, decoded: between apply
// configurations, objects and their JSON values.
func viaJSON(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// typeConverter knows the schema of every built-in kind, from client-go's
// own server-side apply schema.
var typeConverter = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(scheme.Scheme)
})

// fields is an object, or an apply configuration, as JSON values.
func fields(obj any) (map[string]any, error) {
	var out map[string]any
	return out, viaJSON(obj, &out)
}

// createdHash is the value of CreatedAnnotation for desired fields.
func createdHash(desired map[string]any) string {
	data, _ := json.Marshal(desired) // map keys are sorted: stable
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// ownership is which managedFields entries of this manager a child has.
type ownership struct {
	// applied is the set of fields this manager applied, nil without one.
	applied *fieldpath.Set
	// created reports an "Update" entry: a child this manager created.
	created bool
}

func ownershipOf(obj metav1.Object) (ownership, error) {
	var o ownership
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager != FieldManager || mf.Subresource != "" {
			continue
		}
		switch mf.Operation {
		case metav1.ManagedFieldsOperationUpdate:
			o.created = true
		case metav1.ManagedFieldsOperationApply:
			set := &fieldpath.Set{}
			if mf.FieldsV1 != nil {
				if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
					return o, fmt.Errorf("decoding the fields %s applied: %w", FieldManager, err)
				}
			}
			o.applied = set
		}
	}
	return o, nil
}

// upToDate reports whether live is exactly as desired: the fields this
// manager applied, and those it wants, hold what it wants and nothing else. An applied field it no longer wants is drift: the apply
// that follows removes it. A child only created, never applied, is up to
// date when it holds the desired fields and was created from them.
func upToDate(desired map[string]any, live runtime.Object) (bool, error) {
	accessor, ok := live.(metav1.Object)
	if !ok {
		return false, fmt.Errorf("%T has no object metadata", live)
	}
	own, err := ownershipOf(accessor)
	if err != nil {
		return false, err
	}
	if own.applied == nil && own.created && accessor.GetAnnotations()[CreatedAnnotation] != createdHash(desired) {
		return false, nil
	}
	tc := typeConverter()
	want, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: desired})
	if err != nil {
		return false, fmt.Errorf("reading the desired %v: %w", desired["kind"], err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false, err
	}
	content["apiVersion"], content["kind"] = desired["apiVersion"], desired["kind"]
	have, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: content}, typed.AllowDuplicates)
	if err != nil {
		return false, fmt.Errorf("reading the cached %v: %w", desired["kind"], err)
	}
	set, err := want.ToFieldSet()
	if err != nil {
		return false, err
	}
	if own.applied != nil {
		set = set.Union(own.applied)
	}
	// What live holds of those fields, in the JSON form desired has.
	held, err := fields(have.ExtractItems(set.Leaves()).AsValue().Unstructured())
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(held, desired), nil
}

// UpToDate reports whether live, a cached child, is exactly as desired, an
// apply configuration, says (see upToDate).
func UpToDate(desired any, live runtime.Object) (bool, error) {
	want, err := fields(desired)
	if err != nil {
		return false, err
	}
	return upToDate(want, live)
}

// AppliedEntry is the managedFields entry an apply of desired, an apply
// configuration, by this manager leaves: tests give it to objects they
// build as the API server would have.
func AppliedEntry(desired any) (metav1.ManagedFieldsEntry, error) {
	want, err := fields(desired)
	if err != nil {
		return metav1.ManagedFieldsEntry{}, err
	}
	typedWant, err := typeConverter().ObjectToTyped(&unstructured.Unstructured{Object: want})
	if err != nil {
		return metav1.ManagedFieldsEntry{}, err
	}
	set, err := typedWant.ToFieldSet()
	if err != nil {
		return metav1.ManagedFieldsEntry{}, err
	}
	data, err := set.ToJSON()
	if err != nil {
		return metav1.ManagedFieldsEntry{}, err
	}
	return metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: fmt.Sprint(want["apiVersion"]), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: data}}, nil
}
