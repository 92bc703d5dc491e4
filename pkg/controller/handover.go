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
	"context"
	"encoding/json"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// HandoverFieldManager holds the fields this manager stopped setting but
// hands over rather than drops (handedOverFields), until another writer
// (an HPA, kubectl scale) takes them.
const HandoverFieldManager = FieldManager + "-handover"

// handedOverFields are, per resource, the fields that keep their live value
// when this manager stops setting them: an apply that drops them would have
// the API server default them at once (a Deployment's spec.replicas to 1).
var handedOverFields = map[schema.GroupResource][]handedOverField{
	{Group: "apps", Resource: "deployments"}: {{path: []string{"spec", "replicas"}, unset: int64(1)}},
}

type handedOverField struct {
	path []string
	// unset is the value the API server gives the field no one sets: a field
	// that holds it needs no handover. A Create owns the defaults too.
	unset any
}

// handOver applies, under HandoverFieldManager, the live value of every
// handed-over field this manager owns in live but no longer wants, so that
// the apply that follows leaves the value where it is. It is one write, on
// the change from set to unset only. The apply carries live's UID and
// resourceVersion: a value changed since live was read is not put back.
func (c *Children[T, AC]) handOver(ctx context.Context, client ChildClient[T, AC], want map[string]any, live T) error {
	patch, err := handOverPatch(c.Resource, want, live)
	if err != nil || patch == nil {
		return err
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, live.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: HandoverFieldManager, Force: ptr.To(true)})
	if isUIDRefused(err) {
		// The cache is behind; the retry sees the object that is there now.
		return apierrors.NewConflict(c.Resource, live.GetName(), err)
	}
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Handed over fields", "kind", c.Kind, "child", klog.KObj(live), "fieldManager", HandoverFieldManager)
	return nil
}

// handOverPatch is the apply configuration handOver sends for live, a child
// of resource, when want no longer sets fields to hand over; nil when none.
func handOverPatch(resource schema.GroupResource, want map[string]any, live Object) (map[string]any, error) {
	fields := handedOverFields[resource]
	if len(fields) == 0 {
		return nil, nil
	}
	own, err := ownershipOf(live)
	if err != nil || own.applied == nil {
		return nil, err
	}
	var content map[string]any
	var patch map[string]any
	for _, f := range fields {
		if !own.applied.Has(fieldPath(f.path)) {
			continue
		}
		if _, wanted, _ := unstructured.NestedFieldNoCopy(want, f.path...); wanted {
			continue
		}
		if content == nil {
			if content, err = runtime.DefaultUnstructuredConverter.ToUnstructured(live); err != nil {
				return nil, err
			}
		}
		value, found, _ := unstructured.NestedFieldNoCopy(content, f.path...)
		if !found || reflect.DeepEqual(value, f.unset) {
			continue
		}
		if patch == nil {
			patch = map[string]any{}
		}
		if err := unstructured.SetNestedField(patch, runtime.DeepCopyJSONValue(value), f.path...); err != nil {
			return nil, err
		}
	}
	if patch == nil {
		return nil, nil
	}
	metadata := map[string]any{"name": live.GetName(), "uid": string(live.GetUID()), "resourceVersion": live.GetResourceVersion()}
	if live.GetNamespace() != "" {
		metadata["namespace"] = live.GetNamespace()
	}
	patch["apiVersion"], patch["kind"], patch["metadata"] = want["apiVersion"], want["kind"], metadata
	return patch, nil
}

// fieldPath is path, field names only, as a managedFields path.
func fieldPath(path []string) fieldpath.Path {
	out := make(fieldpath.Path, len(path))
	for i := range path {
		out[i] = fieldpath.PathElement{FieldName: &path[i]}
	}
	return out
}
