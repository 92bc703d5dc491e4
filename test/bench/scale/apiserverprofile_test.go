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
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAPIServerProfileWindows: the profile goes on window after window
// until stopped, ends with the window it is in, and the windows are merged
// into one file and removed.
func TestAPIServerProfileWindows(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/profile" {
			http.NotFound(w, r)
			return
		}
		requests.Add(1)
		pprof.Profile(w, r)
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{apiserverProfile: time.Second, artifacts: t.TempDir()}
	ctx := context.Background()
	if p := profileAPIServer(ctx, &cluster{kube: kube}, cfg, scenarioNameSteady, "steady"); p != nil {
		t.Fatalf("a profile of %s, which is not profiled", scenarioNameSteady)
	}
	p := profileAPIServer(ctx, &cluster{kube: kube}, cfg, scenarioNameApps, "apps")
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return requests.Load() >= 2, nil
	}); err != nil {
		t.Fatalf("the second window never started: %d requests", requests.Load())
	}
	p.stopOnce()
	p.stopOnce()
	b, err := p.finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 2 || len(p.windows) != 2 {
		t.Errorf("%d requests, %d windows; want 2 of each: stopped in the second", n, len(p.windows))
	}
	if len(b.parts) != len(apiserverParts)+1 || b.file != p.file {
		t.Errorf("breakdown of %q with %d parts", b.file, len(b.parts))
	}
	for _, w := range p.windows {
		if _, err := os.Stat(w); !os.IsNotExist(err) {
			t.Errorf("window %s left behind: %v", w, err)
		}
	}
	if _, err := os.Stat(p.file); err != nil {
		t.Errorf("the merged profile: %v", err)
	}
}
