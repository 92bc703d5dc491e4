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

package webhook

import (
	"strings"
	"testing"

	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Issue 23, item 4: every webhook and certificate metric the alert rules
// (manifests/alerts/alerts.yaml) query is exported by a replica that has
// served a request: a misspelt or missing one would leave its alert
// silent for good.
func TestAlertRulesQueryExportedWebhookMetrics(t *testing.T) {
	e := newEnv(t)
	r := e.startReplica(cp.Config, quietCA, quietCert)
	e.lb.Set(r.addr)
	e.waitReady(r)
	e.waitBundlesMatchSecret()
	e.waitAdmissionWorks()

	_, body, err := r.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range framework.AlertRuleMetrics(t, "controller_manager_webhook_") {
		if !framework.Exports(body, name) {
			var have []string
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "controller_manager_webhook_") {
					have = append(have, line)
				}
			}
			t.Errorf("the alert rules query %s, which the manager does not export; it exports:\n%s", name, strings.Join(have, "\n"))
		}
	}
}
