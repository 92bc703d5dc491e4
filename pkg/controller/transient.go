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
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ndsl/controller-manager/pkg/leaseguard"
)

// NotObservedError says the informers have not yet observed a reconcile's
// earlier writes for the owner: acting now would work from a stale cache.
type NotObservedError struct {
	Owner Key
	// For is how long the oldest unobserved write has been waiting.
	For time.Duration
}

func (e *NotObservedError) Error() string {
	return fmt.Sprintf("the informers have not yet observed this controller's last writes for %s (waiting %s)", e.Owner, e.For.Round(time.Millisecond))
}

// IsTransient reports whether err says only that the world moved under the
// reconcile or that its cache is behind: a conflict, an object that already
// exists, writes not yet observed, a cancelled context, or a write the lease
// guard refused because this replica's Lease was not fresh. Such errors are
// retried with backoff but are not failures: they are logged quietly and
// must never reach an object's status or a Warning event.
func IsTransient(err error) bool {
	var notObserved *NotObservedError
	switch {
	case err == nil:
		return false
	case errors.As(err, &notObserved):
		return true
	case errors.Is(err, context.Canceled):
		return true
	case errors.Is(err, leaseguard.ErrLeaseNotHeld):
		// This replica's Lease was not fresh for that write: retried here
		// once renewed, or by the next leader; nothing is wrong with the object.
		return true
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return true
	}
	return false
}
