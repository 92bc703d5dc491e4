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

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// accessErrors refuses a create, or an update that turns the Service or the
// Ingress on, by a user who may not create in the App's namespace what the
// App makes the manager create: the Deployment always, the Service with
// enable_service, the Ingress with enable_ingress. old is nil on create;
// ns is the request's namespace.
func (v Validator) accessErrors(ctx context.Context, user authenticationv1.UserInfo, ns string, app, old *appv1beta1.App) field.ErrorList {
	var errs field.ErrorList
	if old == nil {
		errs = append(errs, v.Access.Refusals(ctx, user, field.NewPath("metadata", "namespace"),
			webhook.Action{Verb: "create", Group: "apps", Resource: "deployments", Namespace: ns})...)
	}
	if app.Spec.EnableService && (old == nil || !old.Spec.EnableService) {
		errs = append(errs, v.Access.Refusals(ctx, user, field.NewPath("spec", "enable_service"),
			webhook.Action{Verb: "create", Resource: "services", Namespace: ns})...)
	}
	if app.Spec.EnableIngress && (old == nil || !old.Spec.EnableIngress) {
		errs = append(errs, v.Access.Refusals(ctx, user, field.NewPath("spec", "enable_ingress"),
			webhook.Action{Verb: "create", Group: "networking.k8s.io", Resource: "ingresses", Namespace: ns})...)
	}
	return errs
}
