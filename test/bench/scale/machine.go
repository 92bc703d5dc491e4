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
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports for this project.
const clockTicks = 100

// machineInfo describes where the benchmark ran.
type machineInfo struct {
	CPUs     int
	CPUModel string
	MemTotal string
	Kernel   string
}

func readMachineInfo() machineInfo {
	info := machineInfo{CPUs: runtime.NumCPU(), CPUModel: "unknown", MemTotal: "unknown", Kernel: "unknown"}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				info.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				fields := strings.Fields(rest)
				if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
					info.MemTotal = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		info.Kernel = strings.TrimSpace(string(data))
	}
	return info
}

// loadAverage1 is the 1-minute load average.
func loadAverage1() (float64, error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0, fmt.Errorf("empty /proc/loadavg")
	}
	return strconv.ParseFloat(fields[0], 64)
}

// loadWait is what waitForLowLoad saw.
type loadWait struct {
	Initial, Final float64
	Waited         time.Duration
	TimedOut       bool
}

func (l loadWait) String() string {
	s := fmt.Sprintf("1-minute load average %.2f when the run started", l.Final)
	switch {
	case l.TimedOut:
		s += fmt.Sprintf(" (still at or above the threshold after waiting %s; it was %.2f before)", l.Waited.Round(time.Second), l.Initial)
	case l.Waited > time.Second:
		s += fmt.Sprintf(" (waited %s for it to drop from %.2f)", l.Waited.Round(time.Second), l.Initial)
	}
	return s
}

// waitForLowLoad polls the 1-minute load average until it is below max, for
// at most timeout. Other people's tests share this machine: measuring while
// they run measures them.
func waitForLowLoad(ctx context.Context, max float64, timeout time.Duration) (loadWait, error) {
	logger := klog.FromContext(ctx)
	first, err := loadAverage1()
	if err != nil {
		return loadWait{}, err
	}
	result := loadWait{Initial: first, Final: first}
	if max <= 0 || first < max {
		return result, nil
	}
	logger.Info("Waiting for the machine to be quiet", "load1", first, "below", max, "timeout", timeout)
	begin := time.Now()
	lastLog := begin
	err = wait.PollUntilContextTimeout(ctx, 5*time.Second, timeout, false, func(context.Context) (bool, error) {
		l, err := loadAverage1()
		if err != nil {
			return false, err
		}
		result.Final = l
		if time.Since(lastLog) > time.Minute {
			logger.Info("Still waiting for the machine to be quiet", "load1", l)
			lastLog = time.Now()
		}
		return l < max, nil
	})
	result.Waited = time.Since(begin)
	if err != nil {
		if ctx.Err() != nil {
			return result, ctx.Err()
		}
		result.TimedOut = true
		logger.Info("The machine did not get quiet; measuring anyway", "load1", result.Final)
	}
	return result, nil
}

// waitForeignQuiet waits until processes other than this benchmark and its
// children use less than maxCores over 5 seconds, for at most timeout, and
// returns the last figure. The load average cannot tell: the benchmark's own
// control plane is part of it.
func waitForeignQuiet(ctx context.Context, maxCores float64, timeout time.Duration) (float64, error) {
	if maxCores <= 0 {
		return 0, nil
	}
	last := takeCPUSnapshot()
	others := -1.0
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, timeout, false, func(context.Context) (bool, error) {
		now := takeCPUSnapshot()
		others = last.until(now).Others
		last = now
		return others < maxCores, nil
	})
	if ctx.Err() != nil {
		return others, ctx.Err()
	}
	if err != nil {
		klog.FromContext(ctx).Info("Other processes kept using CPU; measuring anyway", "cores", fmt.Sprintf("%.2f", others))
	}
	return others, nil
}

// procStatFields returns the fields of /proc/<pid>/stat after the command
// name, which may hold spaces and parentheses: fields[0] is field 3 (the
// state). It fails unless there are at least n.
func procStatFields(pid, n int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < n {
		return nil, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return fields, nil
}

// procTimes reads a process's user+system CPU time.
func procTimes(pid int) (time.Duration, error) {
	// utime and stime are fields 14 and 15.
	fields, err := procStatFields(pid, 13)
	if err != nil {
		return 0, err
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// parentPID reads a process's parent (field 4).
func parentPID(pid int) (int, error) {
	fields, err := procStatFields(pid, 2)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(fields[1])
}

// procStatusKB reads a "Name:  N kB" line of /proc/<pid>/status, in bytes.
func procStatusKB(pid int, name string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				break
			}
			kb, err := strconv.ParseFloat(fields[0], 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", name, pid)
}

// childProcesses maps the names (argv[0]'s base name) of this process's
// children to their pids: the control plane components and the managers.
func childProcesses() map[string]int {
	self := os.Getpid()
	out := map[string]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := parentPID(pid); err != nil || ppid != self {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		name := filepath.Base(argv0)
		if _, dup := out[name]; dup {
			name = fmt.Sprintf("%s[%d]", name, pid)
		}
		out[name] = pid
	}
	return out
}

// machineTimes reads the busy and total CPU time of the whole machine.
func machineTimes() (busy, total time.Duration, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("empty /proc/stat")
	}
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("malformed /proc/stat")
	}
	var sum, idle int64
	for i, f := range fields[1:] {
		if i >= 8 { // guest times are already in user and nice
			break
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		sum += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return time.Duration(sum-idle) * time.Second / clockTicks, time.Duration(sum) * time.Second / clockTicks, nil
}

// cpuSnapshot is the CPU time used so far by each process of interest and by
// the whole machine.
type cpuSnapshot struct {
	at           time.Time
	procs        map[string]time.Duration
	busy, total  time.Duration
	machineKnown bool
}

// takeCPUSnapshot reads the CPU times of this process ("bench"), its
// children, and the machine.
func takeCPUSnapshot() cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), procs: map[string]time.Duration{}}
	if t, err := procTimes(os.Getpid()); err == nil {
		s.procs["bench"] = t
	}
	for name, pid := range childProcesses() {
		if t, err := procTimes(pid); err == nil {
			s.procs[name] = t
		}
	}
	if busy, total, err := machineTimes(); err == nil {
		s.busy, s.total, s.machineKnown = busy, total, true
	}
	return s
}

// cpuUsage is the CPU used between two snapshots.
type cpuUsage struct {
	Wall time.Duration
	// Cores is CPU seconds per wall second, per process.
	Cores map[string]float64
	// MachineBusy is the busy share of all cores, 0..1; MachineCores the
	// busy cores, of which Others were used by processes outside this
	// benchmark (other people's work on a shared machine).
	MachineBusy, MachineCores, Others float64
}

func (a cpuSnapshot) until(b cpuSnapshot) cpuUsage {
	u := cpuUsage{Wall: b.at.Sub(a.at), Cores: map[string]float64{}}
	if u.Wall <= 0 {
		return u
	}
	for name, tb := range b.procs {
		if ta, ok := a.procs[name]; ok {
			u.Cores[name] = (tb - ta).Seconds() / u.Wall.Seconds()
		}
	}
	if a.machineKnown && b.machineKnown && b.total > a.total {
		u.MachineBusy = float64(b.busy-a.busy) / float64(b.total-a.total)
		u.MachineCores = (b.busy - a.busy).Seconds() / u.Wall.Seconds()
		own := 0.0
		for _, c := range u.Cores {
			own += c
		}
		u.Others = max(0, u.MachineCores-own)
	}
	return u
}

// shortNames shortens the component names in tables.
var shortNames = map[string]string{
	"kube-apiserver":          "apiserver",
	"etcd":                    "etcd",
	"controller-manager":      "manager",
	"kube-controller-manager": "kcm",
	"kube-scheduler":          "scheduler",
	"kwok":                    "kwok",
	"bench":                   "bench",
}

// String lists the busiest processes first, then the machine.
func (u cpuUsage) String() string {
	type entry struct {
		name  string
		cores float64
	}
	var entries []entry
	for name, c := range u.Cores {
		if short, ok := shortNames[name]; ok {
			name = short
		}
		if c >= 0.005 {
			entries = append(entries, entry{name, c})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].cores > entries[j].cores })
	parts := make([]string, 0, len(entries)+1)
	for _, e := range entries {
		parts = append(parts, fmt.Sprintf("%s %.2f", e.name, e.cores))
	}
	s := strings.Join(parts, ", ")
	if u.MachineBusy > 0 {
		s += fmt.Sprintf(", others %.2f; machine %.0f%% busy", u.Others, 100*u.MachineBusy)
	}
	return s
}
