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

import "github.com/ndsl/controller-manager/pkg/controller"

// Role is the RBAC the App controller needs.
var Role = controller.Role{
	Summary: "The App controller: reads Apps and writes their status; owns a Deployment, " +
		"a Service and an Ingress per App, named after it; reads their pods; moves the stored Apps to the CRD's storage version.",
	Rules: []controller.Rule{
		{APIGroups: []string{"ingress.example.com"}, Resources: []string{"apps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"ingress.example.com"}, Resources: []string{"apps/status"}, Verbs: []string{"update"}},
		{Why: "The children's owner references set blockOwnerDeletion, which clusters running the " +
			"OwnerReferencesPermissionEnforcement admission plugin allow only to those who may update the owner's finalizers.",
			APIGroups: []string{"ingress.example.com"}, Resources: []string{"apps/finalizers"}, Verbs: []string{"update"}},
		{Why: "Children are written with server-side apply (PATCH, creates included), never replaced (PUT). " +
			"A Deployment is deleted by the controller only when an older manager created it on another selector, " +
			"orphaning its pods for the one that replaces it; the garbage collector removes the others with their App.",
			APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: controller.ChildVerbs},
		{Why: "Only while replacing such a Deployment: its old, empty ReplicaSets are deleted rather than orphaned for good.",
			APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: controller.ChildVerbs},
		{Why: "Read only, through an informer restricted to the Deployments' pods (managed-by label), " +
			"for why they are unavailable in the Ready condition.",
			APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: controller.ChildVerbs},
		controller.EventsRule,
		{Why: "Storage version migration, once after an upgrade that changed the Apps' storage version: " +
			"the controller reads the CRD's storage and stored versions, rewrites every App through apps/status, " +
			"then records the storage version as the only one stored.",
			APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			ResourceNames: []string{CRDName}, Verbs: []string{"get"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"},
			ResourceNames: []string{CRDName}, Verbs: []string{"update"}},
	},
}
