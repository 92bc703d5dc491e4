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

package chart

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// timeouts are the timeoutSeconds of every admission webhook, by name.
func timeouts(t *testing.T, objects []object) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, o := range ofKind(objects, "MutatingWebhookConfiguration") {
		var c admissionregistrationv1.MutatingWebhookConfiguration
		o.into(t, &c)
		for _, h := range c.Webhooks {
			out[h.Name] = -1
			if h.TimeoutSeconds != nil {
				out[h.Name] = *h.TimeoutSeconds
			}
		}
	}
	for _, o := range ofKind(objects, "ValidatingWebhookConfiguration") {
		var c admissionregistrationv1.ValidatingWebhookConfiguration
		o.into(t, &c)
		for _, h := range c.Webhooks {
			out[h.Name] = -1
			if h.TimeoutSeconds != nil {
				out[h.Name] = *h.TimeoutSeconds
			}
		}
	}
	return out
}

// Issue 37: webhooks.timeoutSeconds is every admission webhook's timeout;
// the default is the manifests' 5 s; the API server's bounds (1 to 30) are
// the schema's.
func TestChartWebhookTimeout(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   int32
	}{
		{nil, 5},
		{map[string]any{"webhooks": map[string]any{"timeoutSeconds": 12}}, 12},
		{map[string]any{"webhooks": map[string]any{"timeoutSeconds": 30, "certificates": "cert-manager"}}, 30},
	} {
		v, want := tc.values, tc.want
		got := timeouts(t, render(t, "ndsl-system", v))
		if len(got) != 3 {
			t.Errorf("values %v: %d admission webhooks, want 3", v, len(got))
		}
		for name, seconds := range got {
			if seconds != want {
				t.Errorf("values %v: webhook %s timeoutSeconds %d, want %d", v, name, seconds, want)
			}
		}
	}
	for _, bad := range []any{0, 31, "10s"} {
		if _, err := renderText(t, "ndsl-system", map[string]any{"webhooks": map[string]any{"timeoutSeconds": bad}}); err == nil || !strings.Contains(err.Error(), "/webhooks/timeoutSeconds") {
			t.Errorf("webhooks.timeoutSeconds=%v: %v; want the schema to refuse it", bad, err)
		}
	}
}
