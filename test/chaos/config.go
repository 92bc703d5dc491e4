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

package chaos

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// Environment variables of the suite.
const (
	// envMode is "ci" (default: bounded, fixed seed, in make test) or "soak".
	envMode = "CHAOS_MODE"
	// envSeed replays a schedule; default 1 in ci mode, the clock in soak.
	envSeed = "CHAOS_SEED"
	// envDuration is how long faults are injected.
	envDuration = "CHAOS_DURATION"
	// envFaults restricts the schedule to a comma-separated list of kinds.
	envFaults = "CHAOS_FAULTS"
	// envApps, envPipelines and envServices size the load.
	envApps      = "CHAOS_APPS"
	envPipelines = "CHAOS_PIPELINES"
	envServices  = "CHAOS_SERVICES"
	// envBlockerHold is how long blockers stay after the last fault.
	envBlockerHold = "CHAOS_BLOCKER_HOLD"
	// envIncludePending set to "true" also schedules pendingFaults in the
	// CI mode.
	envIncludePending = "CHAOS_INCLUDE_PENDING"
	// envReport is a file the figures are appended to (one Markdown row).
	envReport = "CHAOS_REPORT"
	// envBinary is the manager binary (make build), as for test/e2e.
	envBinary = "E2E_MANAGER_BINARY"
	// envLeases is "single" (default: one Lease for every controller) or
	// "per-controller" (--leader-elect-per-controller).
	envLeases = "CHAOS_LEASES"
	// envShards, a number above 1, runs the managers with --shards (and a
	// Lease per controller): every write is audited against its shard's
	// Lease.
	envShards = "CHAOS_SHARDS"
	// envArtifacts keeps the control plane's and the managers' logs and
	// the audit log.
	envArtifacts = "CHAOS_ARTIFACTS"
)

// pendingFaults are the kinds the CI mode leaves out until the issue-12
// defect each one exposes is fixed on main, and why; the soak and
// CHAOS_INCLUDE_PENDING=true run them. Add an entry only with the defect it
// waits for, and remove it when the fix lands. Empty: the CI mode runs every
// kind.
var pendingFaults = map[faultKind]string{}

// config is one run's settings.
type config struct {
	mode        string
	seed        uint64
	duration    time.Duration
	faults      []faultKind // empty: all
	apps        int
	pipelines   int
	services    int
	blockers    int
	managers    int
	gap         time.Duration // mean time between scheduled steps
	blockerHold time.Duration // after the last fault, before the blockers go
	// convergeBound is the stated bound on convergence after the last
	// fault: the suite fails if the world is not converged by then.
	convergeBound time.Duration
	// perController runs the managers with one Lease per controller; the
	// faults then target the App controller's Lease.
	perController bool
	// shards is --shards: above 1, the App, Ingress and Pipeline
	// controllers run as shard units, each under its own Lease.
	shards    int
	binary    string
	artifacts string
	report    string
}

// Lease settings of the managers: short, so that a failover costs seconds
// and a pause longer than the lease fits in the CI budget.
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = time.Second
)

// leaseLayout is the managers' Lease layout flags.
type leaseLayout struct {
	perController bool
	shards        int
}

// layout is the Lease layout the managers start with.
func (c config) layout() leaseLayout { return leaseLayout{c.perController, max(c.shards, 1)} }

// next is the layout a change-layout step rolls the managers to, and then
// back from: a single Lease to one per controller, one per controller to
// 2 shards, N shards to 2N.
func (l leaseLayout) next() leaseLayout {
	switch {
	case !l.perController:
		return leaseLayout{true, 1}
	case l.shards <= 1:
		return leaseLayout{true, 2}
	}
	return leaseLayout{true, 2 * l.shards}
}

// args are the manager flags of l.
func (l leaseLayout) args() []string {
	if !l.perController {
		return nil
	}
	args := []string{"--leader-elect-per-controller=true", "--standby=warm"}
	if l.shards > 1 {
		args = append(args, fmt.Sprintf("--shards=%d", l.shards))
	}
	return args
}

// withArgs replaces args' layout flags by l's.
func (l leaseLayout) withArgs(args []string) []string {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return strings.HasPrefix(a, "--leader-elect-per-controller") || strings.HasPrefix(a, "--standby") || strings.HasPrefix(a, "--shards")
	})
	return append(out, l.args()...)
}

// String is l as pkg/layout names it.
func (l leaseLayout) String() string { return layout.Of(l.perController, l.shards, shard.KeyVersion) }

// targetLease is the Lease the leader faults act on: the single Lease, or
// the App controller's (its first shard's) with a Lease per controller.
func (l leaseLayout) targetLease() string {
	switch {
	case l.shards > 1:
		return fmt.Sprintf("%s-%s-0-of-%d", framework.LeaseName, appcontroller.ControllerName, l.shards)
	case l.perController:
		return framework.LeaseName + "-" + appcontroller.ControllerName
	}
	return framework.LeaseName
}

// targetLease is the target Lease of the layout the managers start with.
func (c config) targetLease() string { return c.layout().targetLease() }

func configFromEnv() (config, error) {
	c := config{mode: os.Getenv(envMode), managers: 3, binary: os.Getenv(envBinary),
		artifacts: os.Getenv(envArtifacts), report: os.Getenv(envReport)}
	switch c.mode {
	case "", "ci":
		c.mode = "ci"
		c.seed = 1
		c.duration = 75 * time.Second
		c.gap = 7 * time.Second
		c.apps, c.pipelines, c.services, c.blockers = 100, 10, 100, 4
		c.blockerHold = 0 // released right after the last fault: too short for the retry budget
		c.convergeBound = 2 * time.Minute
	case "soak":
		c.seed = uint64(time.Now().UnixNano())
		c.duration = 30 * time.Minute
		c.gap = 20 * time.Second
		c.apps, c.pipelines, c.services, c.blockers = 300, 30, 300, 10
		// Past the last leader's retry budget (15 retries, about 3 minutes).
		c.blockerHold = 200 * time.Second
		c.convergeBound = 3 * time.Minute
	default:
		return c, fmt.Errorf("%s=%q: want ci or soak", envMode, c.mode)
	}
	var err error
	if v := os.Getenv(envSeed); v != "" {
		if c.seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			return c, fmt.Errorf("%s: %w", envSeed, err)
		}
	}
	for env, d := range map[string]*time.Duration{envDuration: &c.duration, envBlockerHold: &c.blockerHold} {
		if v := os.Getenv(env); v != "" {
			if *d, err = time.ParseDuration(v); err != nil {
				return c, fmt.Errorf("%s: %w", env, err)
			}
		}
	}
	for env, n := range map[string]*int{envApps: &c.apps, envPipelines: &c.pipelines, envServices: &c.services} {
		if v := os.Getenv(env); v != "" {
			if *n, err = strconv.Atoi(v); err != nil || *n < 1 {
				return c, fmt.Errorf("%s=%q: want a positive number", env, v)
			}
		}
	}
	c.shards = 1
	if v := os.Getenv(envShards); v != "" {
		if c.shards, err = strconv.Atoi(v); err != nil || c.shards < 1 {
			return c, fmt.Errorf("%s=%q: want a positive number", envShards, v)
		}
		c.perController = c.shards > 1
	}
	switch v := os.Getenv(envLeases); v {
	case "", "single":
	case "per-controller":
		c.perController = true
	default:
		return c, fmt.Errorf("%s=%q: want single or per-controller", envLeases, v)
	}
	if v := os.Getenv(envFaults); v != "" {
		for _, name := range strings.Split(v, ",") {
			k, ok := parseFaultKind(strings.TrimSpace(name))
			if !ok {
				return c, fmt.Errorf("%s: unknown fault %q; known: %s", envFaults, name, strings.Join(faultKindNames(), ","))
			}
			c.faults = append(c.faults, k)
		}
	}
	if c.mode == "ci" && len(c.faults) == 0 && os.Getenv(envIncludePending) != "true" {
		for k := range numFaultKinds {
			if _, pending := pendingFaults[k]; !pending {
				c.faults = append(c.faults, k)
			}
		}
	}
	if c.binary == "" {
		return c, fmt.Errorf("%s is not set: build the manager first and pass it in, e.g. `make test`, `make soak` "+
			"(or `make build && %s=$PWD/_output/controller-manager go test ./test/chaos`)", envBinary, envBinary)
	}
	return c, nil
}
