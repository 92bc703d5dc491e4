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

import rbacv1 "k8s.io/api/rbac/v1"

// Role is the RBAC a controller needs, declared with it: hack/rbacgen
// renders it into the ClusterRole and binding of manifests/rbac/controllers
// (manifests/components/<name> for a controller off by default) and of the
// Helm chart, so that they cannot drift apart or from the controller.
type Role struct {
	// Summary says what the controller does with these rights; it heads
	// the ClusterRole.
	Summary string
	Rules   []Rule
}

// Rule is one rule of a Role.
type Rule struct {
	APIGroups []string
	Resources []string
	// ResourceNames, when set, limits the rule to the objects so named.
	ResourceNames []string
	Verbs         []string
	// Why, when set, says why the rule is needed, above it.
	Why string
}

// ChildVerbs are the verbs on a kind a controller owns children of through
// Children: read from its cache, server-side applied (creates included),
// deleted; never replaced (PUT).
var ChildVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}

// EventsRule is the rule every controller that records Events needs.
var EventsRule = Rule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}

// PolicyRules returns the Role's rules as RBAC has them.
func (r Role) PolicyRules() []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(r.Rules))
	for i, rule := range r.Rules {
		out[i] = rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames, Verbs: rule.Verbs}
	}
	return out
}
