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
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is one scrape of a /metrics endpoint.
type metrics []sample

// parseMetrics reads the Prometheus text exposition format: enough of it for
// counters and gauges (no escapes in label values are needed here).
func parseMetrics(r io.Reader) (metrics, error) {
	var out metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("malformed metric line %q", line)
			}
			s.name = line[:i]
			for _, pair := range splitLabels(line[i+1 : j]) {
				k, v, ok := strings.Cut(pair, "=")
				if ok {
					s.labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
				}
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			name, value, ok := strings.Cut(line, " ")
			if !ok {
				return nil, fmt.Errorf("malformed metric line %q", line)
			}
			s.name, rest = name, strings.TrimSpace(value)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metric line without a value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuotes, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuotes = !inQuotes
		case ',':
			if !inQuotes {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// sum adds the samples of name whose labels pass keep (nil: all).
func (m metrics) sum(name string, keep func(labels map[string]string) bool) float64 {
	var total float64
	for _, s := range m {
		if s.name == name && (keep == nil || keep(s.labels)) {
			total += s.value
		}
	}
	return total
}

// writeMethods are the HTTP methods that change something.
var writeMethods = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// managerCounters are the manager's figures the benchmark follows.
type managerCounters struct {
	Writes, FailedWrites float64 // rest_client_requests_total, POST/PUT/PATCH/DELETE
	// WritesByMethod splits Writes: POST creates (objects and Events), PUT
	// updates (statuses), PATCH (Event repeats, applies), DELETE.
	WritesByMethod map[string]float64
	Reconciles     float64 // controller_manager_reconcile_total
	CPUSeconds     float64 // process_cpu_seconds_total
	RSS, HeapInuse float64 // bytes
}

func countersOf(m metrics) managerCounters {
	return managerCounters{
		Writes: m.sum("rest_client_requests_total", func(l map[string]string) bool { return writeMethods[l["method"]] }),
		FailedWrites: m.sum("rest_client_requests_total", func(l map[string]string) bool {
			return writeMethods[l["method"]] && !strings.HasPrefix(l["code"], "2")
		}),
		WritesByMethod: map[string]float64{
			"POST":   m.sum("rest_client_requests_total", func(l map[string]string) bool { return l["method"] == "POST" }),
			"PUT":    m.sum("rest_client_requests_total", func(l map[string]string) bool { return l["method"] == "PUT" }),
			"PATCH":  m.sum("rest_client_requests_total", func(l map[string]string) bool { return l["method"] == "PATCH" }),
			"DELETE": m.sum("rest_client_requests_total", func(l map[string]string) bool { return l["method"] == "DELETE" }),
		},
		// The manager's, or the peer's (controller-runtime's).
		Reconciles: m.sum("controller_manager_reconcile_total", nil) + m.sum("controller_runtime_reconcile_total", nil),
		CPUSeconds: m.sum("process_cpu_seconds_total", nil),
		RSS:        m.sum("process_resident_memory_bytes", nil),
		HeapInuse:  m.sum("go_memstats_heap_inuse_bytes", nil),
	}
}

// httpClient talks to the managers' plain-HTTP endpoints on loopback,
// without compression: gzipping every scrape would cost the manager CPU
// that the benchmark counts.
var httpClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func httpGet(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func scrape(ctx context.Context, base string) (metrics, error) {
	status, body, err := httpGet(ctx, base+"/metrics")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: status %d", base, status)
	}
	return parseMetrics(strings.NewReader(string(body)))
}

func getDebug(ctx context.Context, base string) (app.DebugStatus, error) {
	var d app.DebugStatus
	status, body, err := httpGet(ctx, base+"/debug/controllers")
	if err != nil {
		return d, err
	}
	if status != http.StatusOK {
		return d, fmt.Errorf("GET %s/debug/controllers: status %d", base, status)
	}
	err = json.Unmarshal(body, &d)
	return d, err
}

// liveGetResources are the resources whose single-object GETs the
// benchmark counts: the parents and children of the convergence scenarios,
// but for volumes and claims, which kube-controller-manager's volume binder
// GETs one by one itself (about 20 per raw Pipeline).
var liveGetResources = map[string]bool{
	"apps": true, "pipelines": true, "deployments": true, "services": true, "ingresses": true,
}

// liveGets is the API server's count of single-object GETs (its verb GET:
// informers' LISTs and WATCHes are verbs of their own there, while a
// client's rest_client_requests_total calls all three GET) of
// liveGetResources, by any client. Apart from the controller under test,
// only kube-controller-manager's garbage collector GETs these one by one
// (an owner it has not seen yet, rarely): the raw runs, which create the
// same owner references with no controller, show how many that is.
func (c *cluster) liveGets(ctx context.Context) (float64, error) {
	body, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	ms, err := parseMetrics(strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	return ms.sum("apiserver_request_total", func(l map[string]string) bool {
		return l["verb"] == "GET" && l["subresource"] == "" && liveGetResources[l["resource"]]
	}), nil
}
