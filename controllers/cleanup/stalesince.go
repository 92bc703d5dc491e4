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

package cleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// StaleSinceAnnotation records, in RFC 3339, when the sweeper first found an
// object stale. It lives on the object, not in the leader's memory, so that
// the stale period runs on across leader changes and restarts: the object is
// removed once the period has passed since that time, whichever replica
// leads then. The sweeper removes it when the object is no longer stale.
//
// Clock skew: the time is the clock of the leader that wrote it, compared
// later with the clock of the leader then. A skew of d between them moves
// the removal by d, which is negligible against a stale period of hours
// (replicas run NTP; the period is meant as a day). A time in the future
// counts as now, so a leader whose clock ran ahead never makes a later one
// remove sooner than the period after its own first look.
const StaleSinceAnnotation = "ndsl.cn/stale-since"

// staleSinceOf returns the time recorded on obj, if it holds a valid one.
func staleSinceOf(obj metav1.Object) (time.Time, bool) {
	v, ok := obj.GetAnnotations()[StaleSinceAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// stalenessPatch is a merge patch that sets (or, with since nil, removes)
// only the stale-since annotation. Its uid and resourceVersion are
// preconditions: the API server refuses it with a Conflict if the object
// changed or was replaced since the cache saw it, and a PATCH never creates,
// so a removed object is never resurrected.
func stalenessPatch(obj metav1.Object, since *time.Time) ([]byte, error) {
	var value any // null removes the key
	if since != nil {
		value = since.UTC().Format(time.RFC3339)
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":             obj.GetUID(),
		"resourceVersion": obj.GetResourceVersion(),
		"annotations":     map[string]any{StaleSinceAnnotation: value},
	}})
}

// writeStaleness records since on cand's object, or removes the record when
// since is nil. A conflict or a missing object is left to the next sweep.
func (c *Controller) writeStaleness(ctx context.Context, cand candidate, since *time.Time) error {
	data, err := stalenessPatch(cand.obj, since)
	if err != nil {
		return err
	}
	ns, name := cand.obj.GetNamespace(), cand.obj.GetName()
	_, err = c.client.Resource(cand.kind.resource).Namespace(ns).Patch(ctx, name, types.MergePatchType, data,
		metav1.PatchOptions{FieldManager: controller.FieldManager})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, replaced or changed since the cache saw it
	}
	if err != nil {
		return fmt.Errorf("recording the staleness of %s %s: %w", cand.kind.kind, klog.KRef(ns, name), err)
	}
	klog.FromContext(ctx).V(2).Info("Recorded staleness", "kind", cand.kind.kind, "object", klog.KRef(ns, name), "staleSince", since)
	return nil
}
