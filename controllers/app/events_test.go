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

import "testing"

func TestChildWritesEvent(t *testing.T) {
	for _, tc := range []struct {
		writes          childWrites
		reason, message string
	}{
		{writes: childWrites{}},
		{writes: childWrites{created: []string{"Deployment", "Service", "Ingress"}},
			reason: "Created", message: "Created Deployment, Service and Ingress"},
		{writes: childWrites{created: []string{"Ingress"}, updated: []string{"Deployment"}},
			reason: "Created", message: "Created Ingress; updated Deployment to match the App"},
		{writes: childWrites{updated: []string{"Deployment", "Service"}, deleted: []string{"Ingress"}},
			reason: "Updated", message: "Updated Deployment and Service to match the App; deleted Ingress: the App no longer asks for it"},
		{writes: childWrites{deleted: []string{"Service"}},
			reason: "Deleted", message: "Deleted Service: the App no longer asks for it"},
	} {
		reason, message := tc.writes.event()
		if reason != tc.reason || message != tc.message {
			t.Errorf("%+v: event %q %q, want %q %q", tc.writes, reason, message, tc.reason, tc.message)
		}
	}
}
