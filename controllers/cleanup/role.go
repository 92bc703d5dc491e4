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

import "github.com/ndsl/controller-manager/pkg/controller"

var sweep = []string{"get", "list", "watch", "patch", "delete"}

// Role is the RBAC the Cleanup controller needs.
var Role = controller.Role{
	Summary: "The Cleanup controller: reads this manager's children (PVs included) and their owners, " +
		"records on each stale one since when it is stale (patch of the annotation ndsl.cn/stale-since), " +
		"and deletes what has been stale for the stale period.",
	Rules: []controller.Rule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: sweep},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims", "persistentvolumes"}, Verbs: sweep},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: sweep},
		{Why: "Owners, looked up to tell orphans from children.",
			APIGroups: []string{"ingress.example.com"}, Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"distri-infer.ndsl.cn"}, Resources: []string{"pipelines"}, Verbs: []string{"get", "list", "watch"}},
		controller.EventsRule,
	},
}
