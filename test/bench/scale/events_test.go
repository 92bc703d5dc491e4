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

package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The Pipelines scenario shares the default namespace with the raw
// Pipelines, which the manager may still reconcile once it is continued:
// their Events must not count against the scenario.
func TestCountedEventKeepsToTheScenariosObjects(t *testing.T) {
	event := func(component, reporting, name string) *corev1.Event {
		return &corev1.Event{
			Source:              corev1.EventSource{Component: component},
			ReportingController: reporting,
			InvolvedObject:      corev1.ObjectReference{Kind: "Pipeline", Name: name},
		}
	}
	for _, tc := range []struct {
		name string
		e    *corev1.Event
		want bool
	}{
		{"the scenario's, by source", event("pipeline", "", "mgr-pl-0001"), true},
		{"the scenario's, by reporting controller", event("", "pipeline", "mgr-pl-0001"), true},
		{"a raw Pipeline's", event("pipeline", "", "raw-pl-0001"), false},
		{"another component's", event("kube-scheduler", "", "mgr-pl-0001"), false},
	} {
		if got := countedEvent(tc.e, "pipeline", "mgr-pl-"); got != tc.want {
			t.Errorf("%s: counted %v, want %v", tc.name, got, tc.want)
		}
	}
}
