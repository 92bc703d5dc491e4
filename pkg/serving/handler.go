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
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/component-base/metrics/legacyregistry"

	_ "k8s.io/component-base/metrics/prometheus/clientgo" // rest_client_*, workqueue_*, leader_election_* metrics
)

// Endpoints are what the HTTP server serves besides /metrics.
type Endpoints struct {
	// Live are the checks of /healthz and /livez, Ready those of /readyz
	// besides ping.
	Live, Ready []healthz.HealthChecker
	// Synced says whether the controllers' informers have synced.
	Synced func() bool
	// Debug is what /debug/controllers serves, as JSON.
	Debug func() any
	// Profiling serves Go's profiles under /debug/pprof/.
	Profiling bool
}

// Handler serves probes, metrics and the debug page. /healthz and /livez
// run the live checks (ping, and the leader election watchdog when it is
// on). /readyz, which the kubelet probes and the webhook Service routes by,
// runs only ping and readiness: the webhook certificate and the lame duck's
// shutting-down. The controllers' cache sync has its own check,
// /readyz/informer-sync, kept out of /readyz: a cold standby or one
// controller's missing RBAC must not take admission and conversion down.
// Every check is also served on its own path and ?verbose lists them.
func Handler(e Endpoints) http.Handler {
	synced := healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if !e.Synced() {
			return errors.New("informer caches have not synced yet")
		}
		return nil
	})

	mux := http.NewServeMux()
	healthz.InstallHandler(mux, e.Live...)
	healthz.InstallLivezHandler(mux, e.Live...)
	healthz.InstallReadyzHandler(mux, append([]healthz.HealthChecker{healthz.PingHealthz}, e.Ready...)...)
	healthz.InstallPathHandler(mux, InformerSyncPath, synced)
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/debug/controllers", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(e.Debug())
	})
	if e.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// InformerSyncPath reports whether the controllers' informers have synced;
// it is not part of /readyz.
const InformerSyncPath = "/readyz/informer-sync"

// ProbePaths are served to anyone: the kubelet probes them without a token.
var ProbePaths = []string{"/healthz", "/livez", "/readyz", InformerSyncPath}
