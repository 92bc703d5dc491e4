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
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
)

// scenarioNameProfile converges a share of scenarios 1-3 again with the
// manager in this process under a CPU profile, and writes a heap profile
// after each: the binary has no pprof endpoint, and profiling it from
// outside (perf) needs privileges.
const scenarioNameProfile = "profile"

// profileTopEntries is how many functions of each profile the report shows.
const profileTopEntries = 8

// profileResult is one profiled convergence and its top functions.
type profileResult struct {
	conv convergence
	file string
	// top is `go tool pprof -top`'s summary line and its first entries,
	// the benchmark's own client goroutines left out.
	summary string
	top     []string
	// heapFile is the heap profile written right after the convergence
	// (after a GC), heapSummary and heapTop its top entries by in-use bytes.
	heapFile    string
	heapSummary string
	heapTop     []string
}

// scenarioProfile profiles the convergence of --profile-scale of each of
// apps, pipelines and ingress that ran, with the in-process manager (same
// code, same client settings as the binary), after the binary's manager
// stopped. Figures other than the profile are not comparable with the
// binary's: the benchmark's own work shares the process.
func scenarioProfile(ctx context.Context, c *cluster, cfg config, res *results) error {
	logger := klog.FromContext(ctx)
	pcfg := cfg
	pcfg.cpuprofile = filepath.Join(cfg.artifacts, "cpu.pprof")
	m, err := startInProcessManager(ctx, c.config)
	if err != nil {
		return err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	if err := waitManagerReady(ctx, m, 5*time.Minute, 3*time.Second); err != nil {
		return err
	}
	share := func(n int) int { return max(1, int(float64(n)*cfg.profileScale)) }
	runs := []struct {
		name string
		run  func(ctx context.Context) (convergence, error)
	}{
		{scenarioNameApps, func(ctx context.Context) (convergence, error) {
			return convergeApps(ctx, c, pcfg, m, scenarioNameApps, "bench-profile-apps", nil, share(cfg.apps), false)
		}},
		{scenarioNamePipelines, func(ctx context.Context) (convergence, error) {
			return convergePipelines(ctx, c, pcfg, m, scenarioNamePipelines, "prof", share(cfg.pipelines), false)
		}},
		{scenarioNameIngress, func(ctx context.Context) (convergence, error) {
			return convergeIngress(ctx, c, pcfg, m, scenarioNameIngress, "bench-profile-ingress", share(cfg.services))
		}},
	}
	for _, r := range runs {
		if _, ran := res.conv[r.name]; !ran {
			continue
		}
		logger.Info("Profiling the convergence", "scenario", r.name)
		var conv convergence
		var err error
		pprof.Do(ctx, pprof.Labels("bench", "client"), func(ctx context.Context) { conv, err = r.run(ctx) })
		if err != nil {
			return err
		}
		p := profileResult{conv: conv, file: profilePath(pcfg, r.name)}
		if p.summary, p.top, err = profileTop(ctx, p.file, profileTopEntries); err != nil {
			p.summary = "go tool pprof failed: " + err.Error()
		}
		p.heapFile = filepath.Join(cfg.artifacts, "heap-"+r.name+".pprof")
		if err := writeHeapProfile(p.heapFile); err != nil {
			return err
		}
		if p.heapSummary, p.heapTop, err = heapTop(ctx, p.heapFile, profileTopEntries); err != nil {
			p.heapSummary = "go tool pprof failed: " + err.Error()
		}
		logger.Info("Heap after the convergence", "scenario", r.name, "file", p.heapFile, "summary", p.heapSummary, "top", p.heapTop)
		res.profiles[r.name] = p
	}
	if cfg.has(scenarioNameSteady) {
		if _, err := m.Terminate(time.Minute); err != nil {
			return fmt.Errorf("stopping the profiled manager: %w", err)
		}
		p, err := profileSteady(ctx, c, pcfg)
		if err != nil {
			return err
		}
		res.profiles[scenarioNameSteady] = p
	}
	return nil
}

// profileSteady profiles a fresh in-process manager with the steady
// scenario's resync period over everything in the cluster, for three
// resync periods once it is ready and idle: where the no-op reconciles and
// the informers' resyncs spend their CPU.
func profileSteady(ctx context.Context, c *cluster, cfg config) (profileResult, error) {
	logger := klog.FromContext(ctx)
	m, err := startInProcessManager(ctx, c.config, func(o *options.Options) { o.Generic.MinResyncPeriod = cfg.resync })
	if err != nil {
		return profileResult{}, err
	}
	defer func() { _, _ = m.Terminate(time.Minute) }()
	if err := waitManagerReady(ctx, m, 10*time.Minute, 3*time.Second); err != nil {
		return profileResult{}, err
	}
	c0, err := m.Counters(ctx)
	if err != nil {
		return profileResult{}, err
	}
	d := 3 * cfg.resync
	logger.Info("Profiling the steady state", "duration", d, "resync", cfg.resync)
	stop, err := startProfile(cfg, scenarioNameSteady)
	if err != nil {
		return profileResult{}, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		stop()
		return profileResult{}, ctx.Err()
	case <-time.After(d):
	}
	stop()
	c1, err := m.Counters(ctx)
	if err != nil {
		return profileResult{}, err
	}
	p := profileResult{file: profilePath(cfg, scenarioNameSteady),
		conv: convergence{n: int(c1.Reconciles - c0.Reconciles), elapsed: time.Since(t0)}}
	if p.summary, p.top, err = profileTop(ctx, p.file, profileTopEntries); err != nil {
		p.summary = "go tool pprof failed: " + err.Error()
	}
	return p, nil
}

// writeHeapProfile writes the heap profile of this process to file after a
// GC, so that its in-use figures are what the caches and the rest hold
// live: the manager's caches, and the benchmark's own trackers beside them.
func writeHeapProfile(file string) error {
	runtime.GC()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing the heap profile: %w", err)
	}
	return f.Close()
}

// heapTop is profileTop for a heap profile, by in-use bytes.
func heapTop(ctx context.Context, file string, n int) (string, []string, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-sample_index=inuse_space",
		fmt.Sprintf("-nodecount=%d", n), file).Output()
	if err != nil {
		return "", nil, err
	}
	summary, top := parsePprofTop(string(out))
	return summary, top, nil
}

// profileTop runs `go tool pprof -top` on file without the benchmark's own
// goroutines and returns its summary line and first n entries, each as
// "function flat% (cum%)".
func profileTop(ctx context.Context, file string, n int) (string, []string, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", n),
		"-tagignore=bench=client", file).Output()
	if err != nil {
		return "", nil, err
	}
	summary, top := parsePprofTop(string(out))
	return summary, top, nil
}

// parsePprofTop reads the output of `go tool pprof -top`.
func parsePprofTop(out string) (summary string, top []string) {
	header := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Showing nodes accounting for"):
			summary = line
		case strings.HasPrefix(line, "flat"):
			header = true
		case header && line != "":
			// flat flat% sum% cum cum% function...
			f := strings.Fields(line)
			if len(f) < 6 {
				continue
			}
			top = append(top, fmt.Sprintf("%s %s (cum %s)", strings.Join(f[5:], " "), f[1], f[4]))
		}
	}
	return summary, top
}
