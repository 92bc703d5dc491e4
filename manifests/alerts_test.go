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

package manifests_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// promtoolVersion is the github.com/prometheus/prometheus module version
// hack/build-promtool.sh builds promtool from.
const promtoolVersion = "v0.316.0"

// promtool is the one hack/build-promtool.sh built beside the control plane
// binaries ($CONTROLPLANE_BIN_DIR, else hack/bin).
func promtool(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(controlplane.BinDirEnv)
	if dir == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "hack", "bin")
	}
	path := filepath.Join(dir, "prometheus-"+promtoolVersion, "promtool")
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("promtool missing at %s; build it with hack/build-promtool.sh (or make promtool)", path)
	}
	return path
}

// Issue 23, item 4: the alerting rules are valid, and their unit tests
// (alerts/alerts_test.yaml) pass.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yaml"},
		{"test", "rules", "alerts_test.yaml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "alerts"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// Every alert has a runbook, and a unit test where it fires and one where
// it does not.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	for file, into := range map[string]any{"alerts/alerts.yaml": &rules, "alerts/alerts_test.yaml": &tests} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if r.Annotations["runbook_url"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s: annotations %v, want a summary and a runbook_url", r.Alert, r.Annotations)
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: a test where it fires: %t, where it does not: %t; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if alerts == 0 {
		t.Fatal("alerts/alerts.yaml has no alerts")
	}
}
