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

package configmaprestart

import "github.com/ndsl/controller-manager/pkg/controller"

// Role is the RBAC the controller needs.
var Role = controller.Role{
	Summary: "The ConfigMap restart controller (an example): reads ConfigMaps and the Deployments that name one, " +
		"and annotates those Deployments.",
	Rules: []controller.Rule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{Why: "Two annotations, with server-side apply (PATCH) under its own field manager; " +
			"never a create: the UID it sends refuses one.",
			APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
		controller.EventsRule,
	},
}
