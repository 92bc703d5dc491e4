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
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Applier is the Apply of a typed client (client-go's gentype clients).
type Applier[T Object, AC any] interface {
	Apply(ctx context.Context, obj AC, opts metav1.ApplyOptions) (T, error)
}

// ApplyFields writes the fields ac sets on live, an object the manager does
// not control (a user's Deployment, say), and no other field: server-side
// apply under fieldManager, which must be the controller's own. Never
// FieldManager: the children are applied under it whole, so a partial
// object applied under it would remove every field it owns that ac lacks.
//
// ac is sent with live's UID: the API server refuses the apply when live
// has been deleted (it would otherwise create a partial object) or replaced
// since it was read, and ApplyFields returns a Conflict, for a retry from a
// fresh cache. Force takes the fields from another manager that set them.
func ApplyFields[T Object, AC ApplyConfiguration[AC]](ctx context.Context, client Applier[T, AC], resource schema.GroupResource,
	live Object, ac AC, fieldManager string) (T, error) {
	var none T
	if fieldManager == "" || fieldManager == FieldManager {
		return none, fmt.Errorf("applying fields of %s %s: field manager %q: want the controller's own", resource, live.GetName(), fieldManager)
	}
	written, err := client.Apply(ctx, ac.WithUID(live.GetUID()), metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if isUIDRefused(err) {
		return none, apierrors.NewConflict(resource, live.GetName(), err)
	}
	return written, err
}
