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
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Action is one write the manager makes on behalf of the requester of an
// admission request.
type Action struct {
	// Verb, Group and Resource as RBAC names them: "create", "apps",
	// "deployments"; Group is "" for the core group.
	Verb, Group, Resource string
	Namespace             string
}

// resource is the resource as kubectl names it: deployments.apps, services.
func (a Action) resource() string {
	if a.Group == "" {
		return a.Resource
	}
	return a.Resource + "." + a.Group
}

// AccessReviewer asks the API server, by SubjectAccessReview, whether the
// requester may do themselves what their object makes the manager do: the
// manager holds more rights than its users and must not lend them.
type AccessReviewer struct {
	Client authorizationv1client.SubjectAccessReviewInterface
}

// Refusals returns a Forbidden error at path for each action user may not
// take, naming the user, the verb, the resource and the namespace. A review
// that fails refuses too (fail closed), with an internal error that says
// so, and ends the checks. A nil AccessReviewer checks nothing: tests of
// the other rules leave it out.
func (r *AccessReviewer) Refusals(ctx context.Context, user authenticationv1.UserInfo, path *field.Path, actions ...Action) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for _, a := range actions {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra(user.Extra),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.Namespace, Verb: a.Verb, Group: a.Group, Resource: a.Resource,
			},
		}}
		got, err := r.Client.Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return append(errs, field.InternalError(path, fmt.Errorf(
				"could not check whether user %q may %s %s in namespace %q, so the request is refused: the SubjectAccessReview failed: %w",
				user.Username, a.Verb, a.resource(), a.Namespace, err)))
		}
		if got.Status.Allowed {
			continue
		}
		msg := fmt.Sprintf("user %q may not %s %s in namespace %q, and the manager does not do it for them",
			user.Username, a.Verb, a.resource(), a.Namespace)
		if got.Status.Reason != "" {
			msg += ": " + got.Status.Reason
		}
		if got.Status.EvaluationError != "" {
			msg += " (authorization error: " + got.Status.EvaluationError + ")"
		}
		errs = append(errs, field.Forbidden(path, msg))
	}
	return errs
}

func extra(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if in == nil {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}
