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
)

// Issue 37: values.schema.json refuses a misspelt or mistyped value, with a
// message that names it, in helm template (and so install and upgrade) and
// helm lint, where before it was silently ignored.
func TestChartSchemaRefusesTypos(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string // in helm's message
	}{
		{map[string]any{"replica": 3}, "'replica' not allowed"},
		{map[string]any{"pipline": map[string]any{"allowedNFS": []any{"nfs.example.com"}}}, "'pipline' not allowed"},
		{map[string]any{"pipeline": map[string]any{"allowedNfs": []any{"nfs.example.com"}}}, "'allowedNfs' not allowed"},
		{map[string]any{"webhooks": map[string]any{"certManager": map[string]any{"issuer": map[string]any{"name": "ca"}}}}, "'issuer' not allowed"},
		{map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enable": true}}}, "'enable' not allowed"},
		{map[string]any{"replicas": "3"}, "/replicas"},
		{map[string]any{"pipeline": map[string]any{"podSecurity": "strict"}}, "/pipeline/podSecurity"},
		{map[string]any{"leaderElection": map[string]any{"leaseDuration": 15}}, "/leaderElection/leaseDuration"},
	} {
		_, err := renderText(t, "ndsl-system", tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template with %v: %v; want an error saying %s", tc.values, err, tc.want)
		}
		out, err := helm(t, "lint", "--strict", chartDir(t), "-f", valuesFile(t, tc.values))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm lint with %v: %v; want an error saying %s\n%s", tc.values, err, tc.want, out)
		}
	}
}

// The defaults (values.yaml itself: every level users write into refuses
// unknown keys, so each value there must be in the schema) and every
// example the README and values.yaml give pass the schema.
func TestChartSchemaAcceptsDocumentedValues(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":                     nil,
		"everything":                   everything("self"),
		"everything with cert-manager": everything("cert-manager"),
		"README install":               {"image": map[string]any{"repository": "registry.example.com/controller-manager", "tag": "v0.1.0"}},
		"extraArgs":                    {"extraArgs": []any{"--concurrent-app-syncs=10", "--app-ingress-class=nginx"}},
		"no anti-affinity":             {"affinity": map[string]any{"podAntiAffinity": nil}},
		"issuerRef": {"webhooks": map[string]any{"certificates": "cert-manager",
			"certManager": map[string]any{"issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "my-ca"}}}},
		"allowlists": {"pipeline": map[string]any{"allowedNFS": []any{"nfs.example.com:/models"}, "allowedImages": []any{"registry.example.com/"},
			"podSecurity": "restricted", "maxReplicas": 0}, "ingress": map[string]any{"allowedHosts": []any{"*.apps.example.com"}}},
		"durations": {"leaderElection": map[string]any{"leaseDuration": "20s", "renewDeadline": "1m30s"},
			"cleanup": map[string]any{"enabled": true, "interval": "10m", "stalePeriod": "2h"}},
		"pdb percentage": {"podDisruptionBudget": map[string]any{"maxUnavailable": "50%"}},
		"networks": {"hostNetwork": true, "webhooks": map[string]any{"port": 10260}, "metrics": map[string]any{"port": 10261},
			"networkPolicy": map[string]any{"enabled": true, "metricsNamespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}},
	} {
		if _, err := renderText(t, "ndsl-system", values); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
