package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apiserver/pkg/server/healthz"
)

// The probes' semantics: /readyz fails while started informers have not
// synced and passes with none started (a standby); /healthz and /livez
// follow the live checks (the leader election watchdog) and ignore caches.
func TestProbes(t *testing.T) {
	status := newManagerStatus(nil)
	var leaseLate atomic.Bool
	watchdog := healthz.NamedCheck("leaderElection", func(*http.Request) error {
		if leaseLate.Load() {
			return errors.New("lease not renewed in time")
		}
		return nil
	})
	h := newHTTPHandler(status, []healthz.HealthChecker{healthz.PingHealthz, watchdog}, nil)
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

	// A standby has started no informers: ready.
	expect("/readyz", 200, "ok")
	expect("/readyz?verbose", 200, "[+]ping ok", "[+]leaderElection ok", "[+]informer-sync ok")

	status.addUnsynced(2)
	expect("/readyz", 500, "[-]informer-sync failed")
	expect("/readyz/informer-sync", 500)
	expect("/healthz", 200)
	expect("/livez", 200)
	status.addUnsynced(-1)
	expect("/readyz", 500, "[-]informer-sync failed")
	status.addUnsynced(-1)
	expect("/readyz", 200)
	expect("/readyz/informer-sync", 200)

	leaseLate.Store(true)
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		expect(p, 500, "[-]leaderElection failed", "[+]ping ok")
	}
	expect("/livez/leaderElection", 500)
	expect("/livez/ping", 200)
}
