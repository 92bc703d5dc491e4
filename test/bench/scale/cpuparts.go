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
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// cpuPart is one part of a controller process's work, by the frames of its
// CPU samples.
type cpuPart struct {
	name  string
	frame *regexp.Regexp
}

// cpuParts are the parts a sample is counted in: the first whose frame is
// in its stack. They name the same work in the manager and in the
// controller-runtime peer, which share client-go's informers.
var cpuParts = []cpuPart{
	{"reconciles (the sync, its reads, apply or update requests and status writes)",
		regexp.MustCompile(`^github\.com/ndsl/controller-manager/pkg/controller\.\(\*Worker\)\.processNextItem$|^sigs\.k8s\.io/controller-runtime/pkg/internal/controller\.\(\*Controller\[.*\]\)\.(reconcileHandler|processNextWorkItem)$`)},
	{"watches and lists (reading, decoding, the informers' transform)",
		regexp.MustCompile(`^k8s\.io/client-go/tools/cache\.\(\*Reflector\)\.|^k8s\.io/apimachinery/pkg/watch\.\(\*StreamWatcher\)\.receive$`)},
	{"informer delivery (store, indexes, event handlers, enqueueing)",
		regexp.MustCompile(`^k8s\.io/client-go/tools/cache\.\(\*(controller|processorListener|sharedProcessor|sharedIndexInformer)\)\.`)},
	{"HTTP/2 and TLS reads of the API server's answers",
		regexp.MustCompile(`^golang\.org/x/net/http2\.\(\*(clientConnReadLoop|ClientConn)\)\.|^net/http\.\(\*http2(clientConnReadLoop|ClientConn)\)\.`)},
	{"garbage collection (background marking)", regexp.MustCompile(`^runtime\.gcBgMarkWorker$`)},
	{"serving /metrics, probes and profiles", regexp.MustCompile(`^net/http\.\(\*conn\)\.serve$`)},
}

// allocationFrame marks samples spent allocating (GC assists included),
// counted apart from the parts, across them.
var allocationFrame = regexp.MustCompile(`^runtime\.mallocgc$`)

// cpuBreakdown is where a CPU profile's time went.
type cpuBreakdown struct {
	file  string
	total time.Duration
	// parts are the time of each part it was broken down by, then of
	// everything else.
	parts      []time.Duration
	allocation time.Duration
}

// fetchCPUProfile takes a CPU profile of the process serving base
// (/debug/pprof/profile) over d into file, in the background: wait returns
// once it is written.
func fetchCPUProfile(ctx context.Context, base, file string, d time.Duration) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		done <- fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(d.Seconds())), file)
	}()
	return func() error { return <-done }
}

// fetchProfile writes what url answers into file. Not httpGet: a CPU
// profile answers after its window, past httpGet's 10 s timeout.
func fetchProfile(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// breakDown reads file's samples with `go tool pprof -traces`, by parts.
func breakDown(ctx context.Context, file string, parts []cpuPart) (cpuBreakdown, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", file).Output()
	if err != nil {
		return cpuBreakdown{}, fmt.Errorf("go tool pprof -traces %s: %w", file, err)
	}
	b, err := parseTraces(string(out), parts)
	b.file = file
	return b, err
}

// parseTraces sums the samples of `go tool pprof -traces` output by part:
// each stack is a value and a function on its first line, then a function
// per line, between separator lines; label lines ("key: value") may come
// first.
func parseTraces(out string, parts []cpuPart) (cpuBreakdown, error) {
	b := cpuBreakdown{parts: make([]time.Duration, len(parts)+1)}
	var value time.Duration
	var frames []string
	flush := func() {
		if len(frames) == 0 {
			return
		}
		b.total += value
		part := len(parts)
	find:
		for i, p := range parts {
			for _, f := range frames {
				if p.frame.MatchString(f) {
					part = i
					break find
				}
			}
		}
		b.parts[part] += value
		for _, f := range frames {
			if allocationFrame.MatchString(f) {
				b.allocation += value
				break
			}
		}
		frames = frames[:0]
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inStacks := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			inStacks = true
			continue
		}
		f := strings.Fields(line)
		switch {
		case !inStacks || len(f) == 0:
		case strings.HasSuffix(f[0], ":"): // a label
		case len(frames) == 0 && len(f) >= 2:
			d, err := time.ParseDuration(f[0])
			if err != nil {
				return b, fmt.Errorf("pprof -traces: %q: %w", line, err)
			}
			value, frames = d, append(frames, frameName(f[1:]))
		default:
			frames = append(frames, frameName(f))
		}
	}
	flush()
	return b, sc.Err()
}

// frameName is a function's name from its fields on a -traces line,
// without pprof's " (inline)" mark; a generic's type may hold spaces.
func frameName(fields []string) string {
	return strings.TrimSuffix(strings.Join(fields, " "), " (inline)")
}

// partNames are the names of parts, in order, and everything else's.
func partNames(parts []cpuPart) []string {
	names := make([]string, 0, len(parts)+1)
	for _, p := range parts {
		names = append(names, p.name)
	}
	return append(names, "everything else (runtime, timers, the scheduler)")
}
