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
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// alertSeries finds the metrics the alert rules select: every selector
// names the job, name{job="ndsl-controller-manager", ...}.
var alertSeries = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{job="ndsl-controller-manager"`)

// AlertRuleMetrics returns the names of the metrics that
// manifests/alerts/alerts.yaml queries and that start with prefix, minus
// up, which Prometheus makes itself.
func AlertRuleMetrics(t testing.TB, prefix string) []string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "alerts", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range alertSeries.FindAllStringSubmatch(string(data), -1) {
		if name := m[1]; name != "up" && strings.HasPrefix(name, prefix) && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Fatalf("manifests/alerts/alerts.yaml queries no metric starting with %q", prefix)
	}
	return names
}

// Exports tells whether a Prometheus text exposition has a sample of name.
func Exports(body, name string) bool {
	return strings.Contains(body, "\n"+name+"{") || strings.Contains(body, "\n"+name+" ")
}
