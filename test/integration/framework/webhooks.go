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

package framework

import (
	"context"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CalledWebhooks names, sorted, the webhooks of the install's mutating and
// validating configurations (ndsl-controller-manager) that the API server
// calls: not the App's, which are kept never called where the admission
// policies admit Apps.
func CalledWebhooks(ctx context.Context, t testing.TB, client kubernetes.Interface) []string {
	t.Helper()
	a := client.AdmissionregistrationV1()
	var names []string
	m, err := a.MutatingWebhookConfigurations().Get(ctx, "ndsl-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range m.Webhooks {
		if !NeverCalled(h.MatchConditions) {
			names = append(names, h.Name)
		}
	}
	v, err := a.ValidatingWebhookConfigurations().Get(ctx, "ndsl-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range v.Webhooks {
		if !NeverCalled(h.MatchConditions) {
			names = append(names, h.Name)
		}
	}
	slices.Sort(names)
	return names
}

// NeverCalled says whether a webhook's match conditions keep the API server
// from ever calling it: a condition that is always false.
func NeverCalled(conditions []admissionregistrationv1.MatchCondition) bool {
	return slices.ContainsFunc(conditions, func(c admissionregistrationv1.MatchCondition) bool { return c.Expression == "false" })
}
