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

package chaos

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFailedReconciles(t *testing.T) {
	dir := t.TempDir()
	log := `E1125 22:05:52.850929   32188 worker.go:159] "Reconcile failed, will retry" err="create Service chaos-apps-3/app-094: ..." logger="app.UnhandledError" controller="app" key="chaos-apps-3/app-094" retries=0
I1125 22:05:52.868057   32188 worker.go:155] "Requeueing" logger="app" controller="app" key="chaos-apps-3/app-094" retries=1
E1125 22:05:53.000000   32188 worker.go:159] "Reconcile failed, will retry" err="x" logger="pipeline.UnhandledError" controller="pipeline" key="pl-00" retries=0
E1125 22:05:54.000000   32188 worker.go:159] "Reconcile failed, will retry" err="x" logger="ingress.UnhandledError" controller="ingress" key="chaos-svc-0/svc-036" retries=0
E1125 22:05:55.000000   32188 worker.go:159] "Reconcile failed, will retry" err="x" logger="app.UnhandledError" controller="app" key="chaos-apps-3/app-094" retries=1
`
	if err := os.WriteFile(filepath.Join(dir, "manager-0.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := failedReconciles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[objectKey]int{appKey("chaos-apps-3", "app-094"): 2, pipelineKey("pl-00"): 1, serviceKey("chaos-svc-0", "svc-036"): 1}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d failed reconciles, want %d", k, got[k], n)
		}
	}
}
