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

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
)

// The kinds of request the load sends, at its version. At v1beta1 every one
// passes the conversion webhook (Apps are stored at v1), and creates the
// admission webhooks where they admit (failurePolicy Fail); at v1 none
// needs the manager. Deletes keep the namespace small.
const (
	loadCreate = "create App"
	loadList   = "list Apps"
	loadDelete = "delete App"
)

const (
	// loadInterval is each kind's period: 10 creates and 10 lists a
	// second, each request started on time, whatever the latency of the ones
	// before (an open loop), up to loadInFlight of each kind at once.
	loadInterval = 100 * time.Millisecond
	loadInFlight = 20
	// loadLiveApps bounds the Apps the load keeps, so that a list converts
	// a few Apps, not everything created so far.
	loadLiveApps = 10
	// loadRequestTimeout bounds one request: the webhooks' own timeout is 5 s.
	loadRequestTimeout = 30 * time.Second
	// loadMinRate is the rate of creates and lists the load must keep.
	loadMinRate = 10.0
)

// requestLoad is a user of the webhooks while the manager is disturbed: it
// creates Apps and lists them at its version at a steady rate, each
// request on its own, and records every request that fails.
type requestLoad struct {
	ns      string
	version string
	// conversionFailuresExpected: the manager is down on purpose. The API
	// server's own watch cache of v1beta1 then converts every App it reads
	// from etcd and fails, though no client request needs it.
	conversionFailuresExpected bool
	started                    time.Time
	cancel                     context.CancelFunc
	wg                         sync.WaitGroup

	mu       sync.Mutex
	stopped  time.Time
	sent     map[string]int
	failed   map[string]int
	failures []string
	// calls are the API server's webhook call counts when the load started.
	calls webhookCalls
}

// startRequestLoad starts the load in ns through v1beta1, the design notes'
// version; it runs until stop.
func startRequestLoad(t *testing.T, ns string) *requestLoad {
	t.Helper()
	return startRequestLoadAt(t, ns, appv1beta1.SchemeGroupVersion.Version)
}

// startRequestLoadAt starts the load in ns through version.
func startRequestLoadAt(t *testing.T, ns, version string) *requestLoad {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	calls, err := apiServerWebhookCalls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &requestLoad{ns: ns, version: version, started: time.Now(), cancel: cancel, sent: map[string]int{}, failed: map[string]int{}, calls: calls}
	t.Cleanup(func() { l.stop() })
	apps := dyn.Resource(appv1beta1.SchemeGroupVersion.WithResource("apps").GroupResource().WithVersion(version)).Namespace(ns)
	l.wg.Go(func() { l.createAndDelete(ctx, apps) })
	l.wg.Go(func() { l.list(ctx, apps) })
	return l
}

// waitStarted waits until the load has sent a few requests of each kind, so
// that a failure during the disruption is not the load's own start.
func (l *requestLoad) waitStarted(t *testing.T) {
	t.Helper()
	eventually(t, time.Minute, "the load to start", func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.sent[loadCreate] >= 10 && l.sent[loadList] >= 10, fmt.Errorf("sent %v", l.sent)
	})
}

// every starts f once per loadInterval, each call in its own goroutine,
// until ctx ends; a tick with loadInFlight calls still running is skipped
// (and shows as a lower rate).
func (l *requestLoad) every(ctx context.Context, f func()) {
	inFlight := make(chan struct{}, loadInFlight)
	tick := time.NewTicker(loadInterval)
	defer tick.Stop()
	for {
		select {
		case inFlight <- struct{}{}:
			l.wg.Go(func() {
				defer func() { <-inFlight }()
				f()
			})
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (l *requestLoad) createAndDelete(ctx context.Context, apps dynamic.ResourceInterface) {
	var mu sync.Mutex
	var live []string
	var created atomic.Int64
	l.every(ctx, func() {
		// No pods and no Service: the load is on the webhooks, not on the nodes.
		name := fmt.Sprintf("load-%d", created.Add(1))
		if err := l.do(loadCreate, func(ctx context.Context) error {
			_, err := apps.Create(ctx, loadApp(l.version, name), metav1.CreateOptions{})
			return err
		}); err != nil {
			return
		}
		mu.Lock()
		live = append(live, name)
		var old string
		if len(live) > loadLiveApps {
			old, live = live[0], live[1:]
		}
		mu.Unlock()
		if old != "" {
			_ = l.do(loadDelete, func(ctx context.Context) error {
				return apps.Delete(ctx, old, metav1.DeleteOptions{})
			})
		}
	})
}

func (l *requestLoad) list(ctx context.Context, apps dynamic.ResourceInterface) {
	l.every(ctx, func() {
		_ = l.do(loadList, func(ctx context.Context) error {
			_, err := apps.List(ctx, metav1.ListOptions{})
			return err
		})
	})
}

// loadApp is an App of the load at version: no pods and no Service, so
// that the load is on the API server and the webhooks, not on the nodes.
func loadApp(version, name string) *unstructured.Unstructured {
	spec := map[string]any{"image": workloadImage(), "replicas": int64(0)}
	annotations := map[string]any{}
	if version == appv1beta1.SchemeGroupVersion.Version {
		spec["enable_service"] = false
		annotations[appv1beta1.EnableIngressRequestedAnnotation] = "false" // not inverted
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": appv1beta1.SchemeGroupVersion.Group + "/" + version, "kind": "App",
		"metadata": map[string]any{"name": name, "annotations": annotations},
		"spec":     spec,
	}}
}

// do sends one request of kind and records it.
func (l *requestLoad) do(kind string, request func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), loadRequestTimeout)
	defer cancel()
	start := time.Now()
	err := request(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent[kind]++
	if err != nil {
		l.failed[kind]++
		l.failures = append(l.failures, fmt.Sprintf("%s %s (took %v): %v",
			start.UTC().Format("15:04:05.000"), kind, time.Since(start).Round(time.Millisecond), err))
	}
	return err
}

// stop ends the load and waits for the requests in flight.
func (l *requestLoad) stop() {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped.IsZero() {
		l.stopped = time.Now()
	}
}

// summary is one line per kind of request and the total, with the rate.
func (l *requestLoad) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	took := l.stopped.Sub(l.started)
	var b strings.Builder
	fmt.Fprintf(&b, "through %s.%s\n", appv1beta1.SchemeGroupVersion.Group, l.version)
	var sent, failed int
	for _, kind := range []string{loadCreate, loadList, loadDelete} {
		sent += l.sent[kind]
		failed += l.failed[kind]
		fmt.Fprintf(&b, "%-13s sent %5d  failed %d\n", kind, l.sent[kind], l.failed[kind])
	}
	fmt.Fprintf(&b, "%-13s sent %5d  failed %d  in %v (%.1f requests/s)\n", "total", sent, failed,
		took.Round(100*time.Millisecond), float64(sent)/took.Seconds())
	return b.String()
}

// check stops the load and fails the test if any request failed, the API
// server failed to call a webhook for any client, or the creates and
// lists fell below loadMinRate; it logs the counts and writes them, with
// every failure, to the artifacts directory.
func (l *requestLoad) check(t *testing.T, what string) {
	t.Helper()
	l.stop()
	now, err := apiServerWebhookCalls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	calls := now.minus(l.calls)
	summary := l.summary() + "API server, all clients: " + calls.String() + "\n"
	t.Logf("requests during %s:\n%s", what, summary)
	l.mu.Lock()
	failures := slices.Clone(l.failures)
	rate := float64(l.sent[loadCreate]+l.sent[loadList]) / l.stopped.Sub(l.started).Seconds()
	l.mu.Unlock()
	if dir := suite.ArtifactsDir; dir != "" {
		report := fmt.Sprintf("%s, from %s to %s UTC\n%s%s", what, l.started.UTC().Format(time.TimeOnly),
			l.stopped.UTC().Format(time.TimeOnly), summary, strings.Join(append(failures, ""), "\n"))
		if err := os.WriteFile(filepath.Join(dir, t.Name()+"-requests.txt"), []byte(report), 0o644); err != nil {
			t.Logf("writing the request counts: %v", err)
		}
	}
	if len(failures) > 0 {
		shown := failures[:min(len(failures), 30)]
		t.Errorf("%d requests failed during %s, want 0; the first %d:\n%s", len(failures), what, len(shown), strings.Join(shown, "\n"))
	}
	if calls.admissionFailed != 0 || (calls.conversionFailed != 0 && !l.conversionFailuresExpected) {
		t.Errorf("the API server failed to call the webhooks during %s: %s", what, calls)
	}
	if rate < loadMinRate {
		t.Errorf("the load sent %.1f creates and lists per second during %s, want at least %.0f", rate, what, loadMinRate)
	}
}
