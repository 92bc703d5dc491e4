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

package serving

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apiserver/pkg/server/healthz"
)

// The probes' semantics: /readyz, which the webhook Service routes by,
// follows only readiness (the webhook certificate, shutting down) and never
// the caches; /readyz/informer-sync fails while started informers have not
// synced and passes with none started (a standby); /healthz and /livez
// follow the live checks (the leader election watchdog) and ignore caches.
func TestProbes(t *testing.T) {
	var unsynced atomic.Int32
	var leaseLate, stopping atomic.Bool
	watchdog := healthz.NamedCheck("leaderElection", func(*http.Request) error {
		if leaseLate.Load() {
			return errors.New("lease not renewed in time")
		}
		return nil
	})
	shuttingDown := healthz.NamedCheck("shutting-down", func(*http.Request) error {
		if stopping.Load() {
			return errors.New("shutting down")
		}
		return nil
	})
	h := Handler(Endpoints{Live: []healthz.HealthChecker{healthz.PingHealthz, watchdog}, Ready: []healthz.HealthChecker{shuttingDown},
		Synced: func() bool { return unsynced.Load() == 0 }})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	expect := func(path string, wantCode int, wantBody ...string) {
		t.Helper()
		code, body := get(path)
		if code != wantCode {
			t.Errorf("GET %s = %d, want %d; body:\n%s", path, code, wantCode, body)
		}
		for _, w := range wantBody {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s body lacks %q:\n%s", path, w, body)
			}
		}
	}

	// A standby has started no informers: synced.
	expect("/readyz", 200, "ok")
	expect("/readyz?verbose", 200, "[+]ping ok", "[+]shutting-down ok")
	expect("/readyz/informer-sync", 200, "ok")

	unsynced.Add(2)
	expect("/readyz", 200)
	expect("/readyz/informer-sync", 500)
	expect("/readyz/informer-sync?verbose", 500, "[-]informer-sync failed")
	expect("/healthz", 200)
	expect("/livez", 200)
	unsynced.Add(-1)
	expect("/readyz/informer-sync", 500)
	unsynced.Add(-1)
	expect("/readyz/informer-sync", 200)

	leaseLate.Store(true)
	for _, p := range []string{"/healthz", "/livez"} {
		expect(p, 500, "[-]leaderElection failed", "[+]ping ok")
	}
	expect("/readyz", 200)
	expect("/livez/leaderElection", 500)
	expect("/livez/ping", 200)

	stopping.Store(true)
	expect("/readyz", 500, "[-]shutting-down failed")
	expect("/healthz", 500) // the watchdog still, not the shutdown
	leaseLate.Store(false)
	expect("/healthz", 200)
}

// TestProfilingOnlyWhenAsked: /debug/pprof/ is served with --profiling
// and not without it.
func TestProfilingOnlyWhenAsked(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		h := Handler(Endpoints{Synced: func() bool { return true }, Profiling: profiling})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
		switch {
		case profiling && (rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine")):
			t.Errorf("with --profiling, GET /debug/pprof/ = %d:\n%s", rec.Code, rec.Body.String())
		case !profiling && rec.Code != http.StatusNotFound:
			t.Errorf("without --profiling, GET /debug/pprof/ = %d, want 404", rec.Code)
		}
	}
}
