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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// apiserverParts break the API server's CPU profile down by the work its
// clients ask of it, so that a manager's phase and the raw one read side
// by side: a write's handler and its storage (the finisher runs storage in
// a goroutine of its own), reads, watches fed from the watch cache, the
// etcd client feeding it, the filters every request passes, the
// connections.
var apiserverParts = []cpuPart{
	{"writes (create, update, patch and delete handlers: decoding, admission, validation, storage, encoding)",
		regexp.MustCompile(`^k8s\.io/apiserver/pkg/endpoints/handlers\.(createHandler|UpdateResource|PatchResource|DeleteResource|DeleteCollection|\(\*patcher\))|^k8s\.io/apiserver/pkg/endpoints/handlers/finisher\.`)},
	{"reads (get and list handlers)",
		regexp.MustCompile(`^k8s\.io/apiserver/pkg/endpoints/handlers\.(GetResource|ListResource|getResourceHandler)`)},
	{"watches (the watch cache's fan-out, encoding events for each watcher)",
		regexp.MustCompile(`^k8s\.io/apiserver/pkg/storage/cacher\.|^k8s\.io/apiserver/pkg/endpoints/handlers\.(\(\*WatchServer\)|serveWatch)`)},
	{"etcd client (requests, the watch feeding the cache)",
		regexp.MustCompile(`^go\.etcd\.io/etcd/|^google\.golang\.org/grpc|^k8s\.io/apiserver/pkg/storage/etcd3\.`)},
	{"request filters (authentication, authorization, priority and fairness, audit)",
		regexp.MustCompile(`^k8s\.io/apiserver/pkg/(endpoints|server)/filters\.|^k8s\.io/apiserver/pkg/util/flowcontrol\.`)},
	{"HTTP/2 and TLS (the clients' connections)",
		regexp.MustCompile(`^golang\.org/x/net/http2\.|^net/http\.\(\*http2|^crypto/tls\.`)},
	{"garbage collection (background marking)", regexp.MustCompile(`^runtime\.gcBgMarkWorker$`)},
}

// apiserverProfileScenarios are the scenarios whose raw and manager phases
// the API server is profiled in: the rows whose ratio is its CPU.
var apiserverProfileScenarios = map[string]bool{scenarioNameApps: true, scenarioNamePipelines: true, scenarioNameIngress: true}

// apiserverProfile is a CPU profile of the API server over a phase, taken
// as consecutive windows of --apiserver-profile: the phase's end is not
// known in advance, and a profile is only answered once its window ends.
type apiserverProfile struct {
	// stopped ends once the phase has: no window starts after it.
	stopped context.Context
	stop    context.CancelFunc
	done    chan error
	file    string
	// windows are the files of the windows taken, merged into file.
	windows []string
}

// profileAPIServer starts profiling the API server for phase ("raw-apps",
// "apps", ...) of scenario, when the scenario is one of
// apiserverProfileScenarios; nil otherwise. Stop it when the phase ends:
// the profile runs on to the end of its current window.
func profileAPIServer(ctx context.Context, c *cluster, cfg config, scenario, phase string) *apiserverProfile {
	if cfg.apiserverProfile <= 0 || cfg.cpuprofile != "" || !apiserverProfileScenarios[scenario] {
		return nil
	}
	stopped, stop := context.WithCancel(context.Background())
	p := &apiserverProfile{stopped: stopped, stop: stop, done: make(chan error, 1),
		file: filepath.Join(cfg.artifacts, "cpu-apiserver-"+phase+".pprof")}
	seconds := strconv.Itoa(max(1, int(cfg.apiserverProfile.Seconds())))
	go func() {
		for i := 0; ; i++ {
			raw, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).DoRaw(ctx)
			if err == nil {
				window := fmt.Sprintf("%s.%d", p.file, i)
				err = os.WriteFile(window, raw, 0o644)
				p.windows = append(p.windows, window)
			}
			if err != nil {
				p.done <- err
				return
			}
			if p.stopped.Err() != nil {
				p.done <- nil
				return
			}
		}
	}()
	return p
}

// finish stops p, waits for its last window and breaks the merged windows
// down; nil without a profile.
func (p *apiserverProfile) finish(ctx context.Context) (*cpuBreakdown, error) {
	if p == nil {
		return nil, nil
	}
	p.stopOnce()
	if err := <-p.done; err != nil {
		return nil, fmt.Errorf("the API server's CPU profile: %w", err)
	}
	merge := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-proto", "-output=" + p.file}, p.windows...)...)
	if out, err := merge.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("merging the API server's CPU profiles: %w: %s", err, out)
	}
	for _, w := range p.windows {
		_ = os.Remove(w)
	}
	b, err := breakDown(ctx, p.file, apiserverParts)
	return &b, err
}

// stopOnce ends p's windows after the current one; nil-safe, idempotent.
func (p *apiserverProfile) stopOnce() {
	if p != nil {
		p.stop()
	}
}
