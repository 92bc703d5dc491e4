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

package pipeline

import "github.com/ndsl/controller-manager/pkg/controller"

// Role is the RBAC the Pipeline controller needs.
var Role = controller.Role{
	Summary: "The Pipeline controller: reads Pipelines and Nodes, owns each Pipeline's PersistentVolume, " +
		"PersistentVolumeClaim, Deployments and Services, creates the children's namespace when it is missing, " +
		"with --pipeline-create-namespaces (it never deletes one), and writes Pipeline status; moves the stored Pipelines to the CRD's storage version.",
	Rules: []controller.Rule{
		{APIGroups: []string{"distri-infer.ndsl.cn"}, Resources: []string{"pipelines"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"distri-infer.ndsl.cn"}, Resources: []string{"pipelines/status"}, Verbs: []string{"update"}},
		{Why: "Owner references with blockOwnerDeletion need this where the OwnerReferencesPermissionEnforcement admission plugin is on.",
			APIGroups: []string{"distri-infer.ndsl.cn"}, Resources: []string{"pipelines/finalizers"}, Verbs: []string{"update"}},
		{Why: "Children are written with server-side apply (PATCH, creates included), never replaced (PUT).",
			APIGroups: []string{""}, Resources: []string{"persistentvolumes", "persistentvolumeclaims", "services"}, Verbs: controller.ChildVerbs},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: controller.ChildVerbs},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		controller.EventsRule,
		{Why: "Storage version migration, once after an upgrade that changed the Pipelines' storage version: " +
			"the controller reads the CRD's storage and stored versions, rewrites every Pipeline through pipelines/status, " +
			"then records the storage version as the only one stored.",
			APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			ResourceNames: []string{CRDName}, Verbs: []string{"get"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"},
			ResourceNames: []string{CRDName}, Verbs: []string{"update"}},
	},
}
