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
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

// leaseTrafficReplicas hold the units of the Lease traffic measurement.
const leaseTrafficReplicas = 3

// leaseTraffic is what 3 replicas with --shards=N cost the API server in
// Lease requests once every unit is led, over a window: the requests per
// second by verb beyond the control plane's own (measured first), and the holder changes in that window (each a lost
// renewal: nothing else moves a unit while the replicas stay).
type leaseTraffic struct {
	shards        int
	window        time.Duration
	led           time.Duration
	perSecond     map[string]float64
	writesSeen    float64 // per second, the Lease writes of the namespace a watch saw
	holderChanges int
}

// leaseVerbs are the API server's verbs counted for Leases.
var leaseVerbs = []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"}

// leaseRequests is the API server's apiserver_request_total for Leases, by
// verb, from every client.
func (c *cluster) leaseRequests(ctx context.Context) (map[string]float64, error) {
	body, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	ms, err := parseMetrics(strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, verb := range leaseVerbs {
		out[verb] = ms.sum("apiserver_request_total", func(l map[string]string) bool {
			return l["resource"] == "leases" && l["verb"] == verb
		})
	}
	return out, nil
}

// leaseRate is the requests per second between two leaseRequests.
func leaseRate(from, to map[string]float64, over time.Duration) map[string]float64 {
	out := map[string]float64{}
	for verb, n := range to {
		out[verb] = (n - from[verb]) / over.Seconds()
	}
	return out
}

// measureLeaseTraffic runs 3 replicas with --shards=cfg.shardsLeaseTraffic
// and no Apps, waits until every unit is led by its assignee, and measures
// the window.
func measureLeaseTraffic(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, history *leaseHistory) (leaseTraffic, error) {
	logger := klog.FromContext(ctx)
	t := leaseTraffic{shards: cfg.shardsLeaseTraffic, window: cfg.shardsLeaseWindow}

	// The control plane's own Lease requests (kube-controller-manager's,
	// the scheduler's, the nodes'): steady, so a minute tells.
	baseWindow := min(t.window, time.Minute)
	logger.Info("Lease traffic: the control plane's own first", "window", baseWindow)
	base0, err := c.leaseRequests(ctx)
	if err != nil {
		return t, err
	}
	if err := sleepCtx(ctx, baseWindow); err != nil {
		return t, err
	}
	base1, err := c.leaseRequests(ctx)
	if err != nil {
		return t, err
	}
	baseline := leaseRate(base0, base1, baseWindow)

	group := fmt.Sprintf("lease-traffic-%d", time.Now().Unix())
	args := shardsArgs(cfg, t.shards, group)
	var replicas []*binaryManager
	defer func() {
		for _, m := range replicas {
			_, _ = m.Terminate(time.Minute)
		}
	}()
	begin := time.Now()
	for i := range leaseTrafficReplicas {
		m, err := startBinaryManager(ctx, l, fmt.Sprintf("lease-traffic-%d", i+1), args...)
		if err != nil {
			return t, err
		}
		replicas = append(replicas, m)
	}
	if _, err := waitUnitsSettled(ctx, replicas, nil, 5*time.Minute); err != nil {
		return t, err
	}
	t.led = time.Since(begin)
	logger.Info("Lease traffic: every unit led by its assignee", "shards", t.shards, "after", t.led, "window", t.window)

	from, err := c.leaseRequests(ctx)
	if err != nil {
		return t, err
	}
	windowStart, writes0 := time.Now(), history.writeCount()
	if err := sleepCtx(ctx, t.window); err != nil {
		return t, err
	}
	to, err := c.leaseRequests(ctx)
	if err != nil {
		return t, err
	}
	elapsed := time.Since(windowStart)
	t.writesSeen = float64(history.writeCount()-writes0) / elapsed.Seconds()
	t.holderChanges = history.holderChanges(windowStart)
	t.perSecond = leaseRate(from, to, elapsed)
	for verb, r := range baseline {
		t.perSecond[verb] -= r
	}
	for _, m := range replicas {
		if exited, err := m.Exited(); exited {
			return t, fmt.Errorf("manager %s exited during the window (%v)", m.Name(), err)
		}
	}
	logger.Info("Lease traffic measured", "shards", t.shards, "perSecond", t.rates(), "writesSeenPerSecond", fmt.Sprintf("%.1f", t.writesSeen),
		"holderChanges", t.holderChanges)
	return t, nil
}

// rates is "PUT 32.1/s, GET 0.0/s, …", the verbs with any traffic first.
func (t leaseTraffic) rates() string {
	verbs := slices.Clone(leaseVerbs)
	slices.SortStableFunc(verbs, func(a, b string) int {
		switch {
		case t.perSecond[a] > t.perSecond[b]:
			return -1
		case t.perSecond[a] < t.perSecond[b]:
			return 1
		}
		return 0
	})
	parts := make([]string, 0, len(verbs))
	for _, v := range verbs {
		parts = append(parts, fmt.Sprintf("%s %.1f/s", v, max(t.perSecond[v], 0)))
	}
	return strings.Join(parts, ", ")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
