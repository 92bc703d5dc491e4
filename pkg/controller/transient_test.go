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
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ndsl/controller-manager/pkg/leaseguard"
)

// A write the lease guard refused or cancelled says only that this replica's
// Lease was not fresh at that moment: the reconcile is retried (by this
// replica once it renews, or by the next leader), and the refusal must not
// reach the object's status or a Warning event. Seen in the chaos suite: a
// create answered after the renew deadline was cancelled, and the App's
// status reported it as a failure.
func TestIsTransient(t *testing.T) {
	guarded := &url.Error{Op: "Post", URL: "https://api/apis/apps/v1/deployments",
		Err: fmt.Errorf("lease app: %w (a POST not completed within the renew deadline 4s): %w", leaseguard.ErrLeaseNotHeld, context.DeadlineExceeded)}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"conflict", apierrors.NewConflict(schema.GroupResource{Resource: "apps"}, "a", errors.New("changed")), true},
		{"already exists", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "services"}, "a"), true},
		{"cancelled", fmt.Errorf("applying: %w", context.Canceled), true},
		{"not observed", &NotObservedError{Owner: Key{Name: "a"}}, true},
		{"refused by the lease guard", fmt.Errorf("creating Deployment: %w", guarded), true},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "a", errors.New("no")), false},
		{"invalid", apierrors.NewBadRequest("two unnamed ports"), false},
	}
	for _, tc := range cases {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
