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

import "testing"

// TestRawIngress: the raw Ingress of a scenario's Service is one the
// Ingress controller would create; a hostless one it refuses, which ended
// a full run before the Ingress rows.
func TestRawIngress(t *testing.T) {
	ing, err := rawIngress(newIngressService(7))
	if err != nil {
		t.Fatal(err)
	}
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "svc-00007.bench.example" {
		t.Errorf("rules %+v, want one for svc-00007.bench.example", ing.Spec.Rules)
	}
}
