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

package ingress

import "github.com/ndsl/controller-manager/pkg/controller"

// Role is the RBAC the Ingress controller needs.
var Role = controller.Role{
	Summary: "The Ingress controller: reads Services, owns Ingresses of the same name.",
	Rules: []controller.Rule{
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}},
		{Why: "Ingresses are written with server-side apply (PATCH, creates included).",
			APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		controller.EventsRule,
	},
}
