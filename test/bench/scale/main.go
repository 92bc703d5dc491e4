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

// Command scale is the controller manager's scale benchmark (issue 7): how
// fast and how cheaply the real binary converges Apps, Pipelines and
// Ingresses, next to the raw write limit of the same API server measured in
// the same run; what it writes and burns in steady state; its memory; and
// how fast a standby takes over.
//
// It starts the local control plane (pkg/testing/controlplane: etcd with
// fsync, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// with fake nodes, so Deployments get Ready pods), or reuses $KUBECONFIG's
// with --use-existing-cluster, and then, for the scenarios --scenarios
// selects:
//
//   - warm-up: App sets created and deleted (a cold API server writes about
//     half as fast);
//   - raw limits: plain client-go creates of exactly what each scenario's
//     controller writes, parent included, --concurrency at a time
//     (default: the controllers' default worker count), no rate limit,
//     each right before its scenario with the manager paused;
//   - apps, pipelines, ingress: the binary (--kube-api-qps=-1, default
//     workers, leader election off) converges the objects created at once;
//   - peer (before apps): the same Apps converged by test/bench/peer, a
//     controller-runtime operator built in its own module (--peer-binary);
//   - memory: that manager's peak RSS and Go heap after those three, per
//     cached and per managed object;
//   - profile: a share of those three converged again by the manager in
//     this process under a CPU profile; the top functions go in the report;
//   - steady: a fresh manager with --min-resync-period=--resync over
//     everything, for --steady-duration: writes (must be 0) and CPU;
//   - failover: three managers with leader election: kill -9 of the
//     leader, then SIGTERM of the next, timing the standby's takeover;
//   - conversion, admission: the webhooks' cost, and the admission
//     policies' beside them;
//   - flood: a warm standby of the App controller takes over with N
//     converged Apps queued, and one App is created at once: its time to
//     first reconcile with the fifo and the priority queue;
//   - spread: three replicas with a Lease per controller: how the four
//     Leases are divided, and how long until all four are led again after
//     kill -9 of one replica;
//   - shards: for each N of --shards-replicas, N replicas with --shards=N
//     converge Apps spread over many namespaces; each replica's RSS, then
//     the handover on a join and on kill -9 of one;
//   - noisy (last): a fresh manager's RSS over the same Apps without, then
//     with, --noise-objects objects it does not manage.
//
// It prints one table and writes it with the machine, versions and command
// into --markdown (docs/benchmarks.md), between generated-section markers.
// With --cpuprofile it runs the manager in this process instead, under
// runtime/pprof, for the convergence scenarios only.
//
//	go run ./test/bench/scale --scenarios=apps,ingress --apps=200 --services=500 --markdown=
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

// The scenarios, in the order they run.
const (
	scenarioNameApps      = "apps"
	scenarioNamePipelines = "pipelines"
	scenarioNameIngress   = "ingress"
	scenarioNameMemory    = "memory"
	scenarioNameSteady    = "steady"
	scenarioNameFailover  = "failover"
)

var allScenarios = []string{scenarioNameApps, scenarioNamePipelines, scenarioNameIngress, scenarioNameMemory, scenarioNameProfile, scenarioNamePeer,
	scenarioNameSteady, scenarioNameFailover, scenarioNameConversion, scenarioNameAdmission, scenarioNameFlood, scenarioNameSpread, scenarioNameShards, scenarioNameNoisy}

type config struct {
	scenarios   []string
	useExisting bool
	binary      string
	peerBinary  string
	peerRounds  int
	peerProfile time.Duration
	// apiserverProfile is the window of the API server's CPU profiles,
	// taken one after another over the raw and manager phases of Apps,
	// Pipelines and Ingresses.
	apiserverProfile time.Duration
	binDir           string
	artifacts        string
	markdown         string
	cpuprofile       string
	managerArgs      []string
	// apiserverArgs are extra flags of the local kube-apiserver (alpha
	// paths such as CBOR).
	apiserverArgs []string

	apps, pipelines, steps, services int
	warmup, concurrency              int
	nodes, podsPerNode               int

	resync, steadyDuration                    time.Duration
	leaseDuration, renewDeadline, retryPeriod time.Duration
	failoverApps                              int
	failoverSizes                             []int
	failoverStandby                           []string
	conversionApps, conversionLists           int
	admissionCreates                          int
	floodSizes                                []int
	profileScale                              float64
	noiseObjects, noisyApps                   int
	shardsReplicas                            []int
	shardsCount                               int
	shardsApps, shardsNamespaces              int
	shardsLeaseTraffic                        int
	shardsLeaseWindow                         time.Duration

	maxLoad, maxOthers                        float64
	loadWait                                  time.Duration
	quietRate                                 float64
	quietTimeout, settleTimeout, phaseTimeout time.Duration
	cleanupTimeout, timeout                   time.Duration
}

func (c config) has(scenario string) bool { return slices.Contains(c.scenarios, scenario) }

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var cfg config
	var scenarios string
	var managerArgs stringList
	var floodSizes, shardsReplicas string
	workers := appcontroller.DefaultOptions().Workers
	flag.StringVar(&scenarios, "scenarios", strings.Join(allScenarios, ","), "Comma-separated scenarios to run: "+strings.Join(allScenarios, ", ")+".")
	flag.BoolVar(&cfg.useExisting, "use-existing-cluster", false, "Run against the cluster of $KUBECONFIG (it must run kube-controller-manager, kube-scheduler and kwok) instead of starting the local control plane.")
	flag.StringVar(&cfg.binary, "binary", "_output/controller-manager", "The controller-manager binary under test (make build).")
	flag.StringVar(&cfg.peerBinary, "peer-binary", "_output/bench-peer", "The peer operator of the peer scenario: test/bench/peer built in its own module (make bench builds it).")
	flag.DurationVar(&cfg.apiserverProfile, "apiserver-profile", 5*time.Second, "CPU profiles of the API server over the raw and the manager's phase of Apps, Pipelines and Ingresses, from the first create to the end, taken one after another in windows this long and merged (the last runs on past the end), broken down side by side by the work asked of it (0: none).")
	flag.DurationVar(&cfg.peerProfile, "peer-profile", 40*time.Second, "In the peer scenario's first round, a CPU profile of the manager's and of the peer's first this long of the convergence, broken down by part of the work (0: none).")
	flag.IntVar(&cfg.peerRounds, "peer-rounds", 2, "Rounds of the peer scenario: in each, --apps Apps converged by the manager with the App controller alone and by the peer, alternating which goes first; the report gives the median of each figure.")
	flag.Float64Var(&cfg.profileScale, "profile-scale", 0.25, "The profile scenario converges this share of --apps, --pipelines and --services again with the manager in this process, under a CPU profile.")
	flag.IntVar(&cfg.noiseObjects, "noise-objects", 50000, "Objects the manager does not manage in the noisy scenario: Deployments of 0 replicas, headless Services without selector, Pods no scheduler takes, ConfigMaps, a quarter each.")
	flag.IntVar(&cfg.noisyApps, "noisy-apps", 500, "Apps converged by a fresh manager without, then with, the noise in the noisy scenario.")
	flag.IntVar(&cfg.shardsCount, "shards-count", 0, "--shards of every run of the shards scenario; 0: the largest of --shards-replicas.")
	flag.StringVar(&shardsReplicas, "shards-replicas", "1,2,4", "Replica counts of the shards scenario: for each N, N replicas with --shards=S (S the largest N) converge --shards-apps Apps; then one more joins, the busiest leaves (SIGTERM), the next busiest is killed (kill -9), and the rest roll to --shards=S/2.")
	flag.IntVar(&cfg.shardsApps, "shards-apps", 3000, "Apps (0 pods, with Service and Ingress: 4 cached objects each) in the shards scenario, for each N: 3000 reach 12,000 cached objects. 10000 reach 40,000, where the 1/N share shows more, and take about half an hour.")
	flag.IntVar(&cfg.shardsLeaseTraffic, "shards-lease-traffic", 64, "Shards of the shards scenario's Lease traffic measurement: 3 replicas with --shards=N, no Apps, their Lease requests per second over --shards-lease-window; 0 skips it.")
	flag.DurationVar(&cfg.shardsLeaseWindow, "shards-lease-window", 10*time.Minute, "The Lease traffic measurement's window.")
	flag.IntVar(&cfg.shardsNamespaces, "shards-namespaces", 128, "Namespaces the shards scenario spreads its Apps over (random names, as many in each shard's hash range).")
	flag.StringVar(&cfg.binDir, "bin-dir", "", "Control plane binaries (default: $"+controlplane.BinDirEnv+", else hack/bin).")
	flag.StringVar(&cfg.artifacts, "artifacts", "_output/bench", "Directory for the managers' logs and the control plane's state and logs (replaced at start).")
	flag.StringVar(&cfg.markdown, "markdown", "docs/benchmarks.md", "Markdown file whose generated section gets the results; empty: print only.")
	flag.StringVar(&cfg.cpuprofile, "cpuprofile", "", "Profile mode: run the manager in this process and write a CPU profile per scenario, from the first create to convergence, to this path with the scenario's name before the extension; only apps, pipelines and ingress run, and the markdown file is left alone.")
	flag.Var(&managerArgs, "manager-arg", "Extra flag for every manager process (repeatable), e.g. --manager-arg=--concurrent-app-syncs=20. Not in profile mode.")
	flag.IntVar(&cfg.apps, "apps", 2000, "Apps (each with Service and Ingress) in the apps scenario.")
	flag.IntVar(&cfg.pipelines, "pipelines", 200, "Pipelines in the pipelines scenario.")
	flag.IntVar(&cfg.steps, "steps", 5, "Steps per Pipeline.")
	flag.IntVar(&cfg.services, "services", 5000, "Annotated headless Services in the ingress scenario.")
	flag.IntVar(&cfg.warmup, "warmup", 500, "App sets (4 objects each) created and deleted before measuring.")
	flag.IntVar(&cfg.concurrency, "concurrency", workers, "Concurrent creators, in the raw measurements and of the parents in the manager's; the default is the controllers' default worker count.")
	flag.IntVar(&cfg.nodes, "nodes", 4, "kwok nodes to create.")
	flag.IntVar(&cfg.podsPerNode, "pods-per-node", 2000, "Pod capacity of each kwok node.")
	flag.DurationVar(&cfg.resync, "resync", 30*time.Second, "--min-resync-period of the steady-state manager (informers resync every [resync, 2×resync]).")
	flag.DurationVar(&cfg.steadyDuration, "steady-duration", 5*time.Minute, "How long the steady state is measured.")
	flag.DurationVar(&cfg.leaseDuration, "lease-duration", 15*time.Second, "--leader-elect-lease-duration of the failover managers (the binary's default).")
	flag.DurationVar(&cfg.renewDeadline, "renew-deadline", 10*time.Second, "--leader-elect-renew-deadline of the failover managers.")
	flag.DurationVar(&cfg.retryPeriod, "retry-period", 2*time.Second, "--leader-elect-retry-period of the failover managers.")
	flag.IntVar(&cfg.conversionApps, "conversion-apps", 1000, "Apps listed through v1 (converted by the webhook) and v1beta1 in the conversion scenario.")
	flag.IntVar(&cfg.conversionLists, "conversion-lists", 10, "Lists of all of them timed in each version.")
	flag.IntVar(&cfg.admissionCreates, "admission-creates", 300, "Sequential App creates timed through the webhooks, through the admission policies and through neither, in the admission scenario.")
	flag.StringVar(&floodSizes, "flood-sizes", "2000", "Counts of converged Apps in the flood scenario, ascending: for each, the time to a fresh App's first reconcile right after a warm standby takes over with them all queued, with the fifo and the priority queue. 20000 adds about 12 minutes (creating and converging 18,000 more Apps), beyond make bench's budget.")
	flag.IntVar(&cfg.failoverApps, "failover-apps", 20, "Apps created for the failover managers to reconcile (besides whatever exists).")
	var failoverSizes, failoverStandby string
	flag.StringVar(&failoverSizes, "failover-sizes", "", "Comma-separated cache sizes (cached objects) at which the failovers are measured, in increasing order; annotated headless Services (each with the Ingress the manager makes) fill the cache up to each. Empty: once, at whatever the other scenarios left.")
	flag.StringVar(&failoverStandby, "failover-standby", "cold,warm", "Comma-separated --standby modes measured in the failover scenario, at each size.")
	flag.Float64Var(&cfg.maxLoad, "max-load", 1.0, "Wait before starting until the 1-minute load average is below this; 0 does not wait.")
	flag.Float64Var(&cfg.maxOthers, "max-others", 0.25, "Before each measurement, wait (up to --quiet-timeout) until processes outside this benchmark and its control plane use fewer CPU cores than this; 0 does not wait (nor does --use-existing-cluster).")
	flag.DurationVar(&cfg.loadWait, "load-wait", 10*time.Minute, "Wait at most this long for --max-load, then measure anyway (and say so).")
	flag.Float64Var(&cfg.quietRate, "quiet-rate", 10, "Before each measurement, wait until the cluster writes fewer objects per second than this (kube-controller-manager, scheduler and kwok caught up).")
	flag.DurationVar(&cfg.quietTimeout, "quiet-timeout", 15*time.Minute, "Wait at most this long for --quiet-rate, then measure anyway.")
	flag.DurationVar(&cfg.phaseTimeout, "phase-timeout", 15*time.Minute, "Give up on a convergence after this long.")
	flag.DurationVar(&cfg.settleTimeout, "settle-timeout", 20*time.Minute, "Wait at most this long for every App and Pipeline to be Ready (pods available) before counting writes.")
	flag.DurationVar(&cfg.cleanupTimeout, "cleanup-timeout", 15*time.Minute, "Wait at most this long for the raw measurements' objects to be deleted.")
	flag.DurationVar(&cfg.timeout, "timeout", 3*time.Hour, "Give up after this long.")
	flag.Func("apiserver-arg", "An extra flag of the local kube-apiserver (repeatable), e.g. --apiserver-arg=--feature-gates=CBORServingAndStorage=true.", func(s string) error {
		cfg.apiserverArgs = append(cfg.apiserverArgs, s)
		return nil
	})
	klog.InitFlags(nil)
	flag.Parse()
	cfg.managerArgs = managerArgs
	for _, f := range strings.Split(failoverSizes, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "--failover-sizes: %q is not a positive count\n", f)
			os.Exit(2)
		}
		cfg.failoverSizes = append(cfg.failoverSizes, n)
	}
	for _, m := range strings.Split(failoverStandby, ",") {
		if m = strings.TrimSpace(m); m != options.StandbyWarm && m != options.StandbyCold {
			fmt.Fprintf(os.Stderr, "--failover-standby: %q is neither %s nor %s\n", m, options.StandbyWarm, options.StandbyCold)
			os.Exit(2)
		}
		cfg.failoverStandby = append(cfg.failoverStandby, m)
	}
	var err error
	if cfg.shardsReplicas, err = parseShardsReplicas(shardsReplicas); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cfg.floodSizes, err = parseFloodSizes(floodSizes); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	for _, s := range strings.Split(scenarios, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			fmt.Fprintf(os.Stderr, "unknown scenario %q; known: %s\n", s, strings.Join(allScenarios, ", "))
			os.Exit(2)
		}
		cfg.scenarios = append(cfg.scenarios, s)
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	ctx = klog.NewContext(ctx, klog.Background())
	err = run(ctx, cfg)
	klog.Flush()
	if err != nil {
		klog.ErrorS(err, "Benchmark failed")
		klog.Flush()
		os.Exit(1)
	}
}

func (c *config) validate() error {
	if len(c.scenarios) == 0 {
		return errors.New("--scenarios selects nothing")
	}
	if c.apps < 1 || c.pipelines < 1 || c.steps < 1 || c.services < 1 || c.concurrency < 1 || c.nodes < 1 || c.podsPerNode < 1 || c.warmup < 0 {
		return errors.New("--apps, --pipelines, --steps, --services, --concurrency, --nodes and --pods-per-node must be positive, --warmup not negative")
	}
	if c.steps > 64 {
		return errors.New("--steps must be at most 64 (the Pipeline CRD's limit)")
	}
	if c.useExisting {
		c.maxOthers = 0 // the cluster's own processes are not this command's children
	}
	if c.cpuprofile != "" {
		if len(c.managerArgs) > 0 {
			return errors.New("--manager-arg does not apply to the in-process manager of --cpuprofile")
		}
		c.scenarios = slices.DeleteFunc(c.scenarios, func(s string) bool {
			return s != scenarioNameApps && s != scenarioNamePipelines && s != scenarioNameIngress
		})
		if len(c.scenarios) == 0 {
			return errors.New("--cpuprofile profiles the apps, pipelines and ingress scenarios: select at least one")
		}
		c.markdown = ""
	}
	if c.has(scenarioNamePeer) && c.cpuprofile == "" {
		if fi, err := os.Stat(c.peerBinary); err != nil || fi.IsDir() {
			return fmt.Errorf("--peer-binary %s: not a file (make bench builds it: cd test/bench/peer && go build -o ../../../_output/bench-peer .)", c.peerBinary)
		}
	}
	if c.peerRounds < 1 {
		return errors.New("--peer-rounds must be positive")
	}
	if c.shardsLeaseTraffic < 0 || c.shardsLeaseTraffic > 64 || c.shardsLeaseWindow <= 0 {
		return errors.New("--shards-lease-traffic must be from 0 to 64 and --shards-lease-window positive")
	}
	if c.shardsApps < 1 || c.shardsNamespaces < 1 {
		return errors.New("--shards-apps and --shards-namespaces must be positive")
	}
	if c.profileScale <= 0 || c.profileScale > 1 || c.noiseObjects < 4 || c.noisyApps < 1 {
		return errors.New("--profile-scale must be in (0, 1], --noise-objects at least 4, --noisy-apps positive")
	}
	for _, p := range []*string{&c.binary, &c.peerBinary, &c.artifacts} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	if c.cpuprofile == "" {
		if fi, err := os.Stat(c.binary); err != nil || fi.IsDir() {
			return fmt.Errorf("--binary %s: not a file (run make build)", c.binary)
		}
	}
	return nil
}

// results are everything the table reports.
type results struct {
	cfg          config
	machine      machineInfo
	load         loadWait
	started      time.Time
	finished     time.Time
	managerVer   string
	raw          map[string]rawResult
	conv         map[string]convergence
	memory       *memoryResult
	steady       *steadyResult
	failover     *failoverResult
	conversion   *conversionResult
	admission    *admissionResult
	flood        *floodResult
	spread       *spreadResult
	shards       *shardsResult
	peer         *peerResult
	profiles     map[string]profileResult
	noisy        *noisyResult
	profileNotes string
	// stoppedBy is the failure that ended the run early, if one did.
	stoppedBy error
}

func run(ctx context.Context, cfg config) error {
	logger := klog.FromContext(ctx)
	res := &results{cfg: cfg, machine: readMachineInfo(), started: time.Now(),
		raw: map[string]rawResult{}, conv: map[string]convergence{}, profiles: map[string]profileResult{}}
	if cfg.cpuprofile == "" {
		res.managerVer = binaryVersion(ctx, cfg.binary)
	} else {
		res.managerVer = "in-process (this command's build)"
	}
	if err := os.MkdirAll(cfg.artifacts, 0o755); err != nil {
		return err
	}
	var err error
	if res.load, err = waitForLowLoad(ctx, cfg.maxLoad, cfg.loadWait); err != nil {
		return err
	}
	logger.Info("Starting", "load", res.load.String(), "scenarios", cfg.scenarios)

	c, err := startCluster(ctx, cfg)
	if c != nil {
		defer c.stop()
	}
	if err != nil {
		return err
	}
	// Every scenario stops its managers before the launcher closes.
	launcher := newLauncher(cfg, c.kubeconfig)
	defer launcher.Close()
	logger.Info("Cluster ready", "kubeconfig", c.kubeconfig, "nodes", c.nodes)

	needManager := cfg.has(scenarioNameApps) || cfg.has(scenarioNamePipelines) || cfg.has(scenarioNameIngress) || cfg.has(scenarioNameMemory)
	if cfg.has(scenarioNameApps) || cfg.has(scenarioNamePipelines) || cfg.has(scenarioNameIngress) || cfg.has(scenarioNamePeer) {
		if err := warmUp(ctx, c, cfg); err != nil {
			return err
		}
	}
	// Each raw limit is measured right before the manager's scenario of the
	// same kind, on the cluster that scenario meets (row 2 meets row 1's
	// Apps), with the manager paused so that it neither reconciles the raw
	// objects nor costs the API server its watches meanwhile. In profile
	// mode, and for a raw limit no manager scenario follows (the peer's),
	// they are measured first, on the nearly empty cluster. Each is cleaned
	// up before anything else runs.
	raws := map[string]func() (rawResult, error){
		scenarioNameApps: func() (rawResult, error) {
			return rawApps(ctx, c, cfg, scenarioNameApps, "bench-raw-apps", cfg.apps, 1)
		},
		scenarioNamePipelines: func() (rawResult, error) { return rawPipelines(ctx, c, cfg, cfg.pipelines) },
		scenarioNameIngress:   func() (rawResult, error) { return rawIngresses(ctx, c, cfg, cfg.services) },
	}
	deferRaws := needManager && cfg.cpuprofile == ""
	for _, name := range []string{scenarioNameApps, scenarioNamePipelines, scenarioNameIngress} {
		wanted := cfg.has(name) || (name == scenarioNameApps && cfg.has(scenarioNamePeer))
		if !wanted || (deferRaws && cfg.has(name)) {
			continue
		}
		if err := measureRawLimit(ctx, res, name, raws[name]); err != nil {
			return err
		}
	}

	if err := runScenarios(ctx, c, cfg, launcher, res, raws, needManager, deferRaws); err != nil {
		return partialReport(res, err)
	}
	res.finished = time.Now()
	return report(ctx, res)
}

// runScenarios runs the peer and every manager scenario selected, in order,
// into res; raws are the raw limits still to measure right before their
// scenarios (deferRaws). The first failure ends it.
func runScenarios(ctx context.Context, c *cluster, cfg config, launcher *e2eframework.Launcher, res *results, raws map[string]func() (rawResult, error), needManager, deferRaws bool) error {
	// The peer before the manager, on the same nearly empty cluster the
	// manager's Apps meet; its Apps are deleted before the manager starts.
	if cfg.has(scenarioNamePeer) && cfg.cpuprofile == "" {
		p, err := scenarioPeer(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("peer: %w", err)
		}
		res.peer = &p
	}
	if needManager {
		if !deferRaws {
			raws = nil
		}
		if err := runManagerScenarios(ctx, c, cfg, launcher, res, raws); err != nil {
			return err
		}
	}
	if cfg.has(scenarioNameProfile) && cfg.cpuprofile == "" && len(res.conv) > 0 {
		if err := scenarioProfile(ctx, c, cfg, res); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	}
	if cfg.has(scenarioNameSteady) {
		s, err := scenarioSteady(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("steady state: %w", err)
		}
		res.steady = &s
	}
	if cfg.has(scenarioNameFailover) {
		f, err := scenarioFailover(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("failover: %w", err)
		}
		res.failover = &f
	}
	if cfg.has(scenarioNameConversion) && cfg.cpuprofile == "" {
		cr, err := scenarioConversion(ctx, c, cfg)
		if err != nil {
			return fmt.Errorf("conversion: %w", err)
		}
		res.conversion = &cr
	}
	if cfg.has(scenarioNameAdmission) && cfg.cpuprofile == "" {
		a, err := scenarioAdmission(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("admission: %w", err)
		}
		res.admission = &a
	}
	if cfg.has(scenarioNameFlood) && cfg.cpuprofile == "" {
		f, err := scenarioFlood(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("flood: %w", err)
		}
		res.flood = &f
	}
	if cfg.has(scenarioNameSpread) && cfg.cpuprofile == "" {
		s, err := scenarioSpread(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("spread: %w", err)
		}
		res.spread = &s
	}
	if cfg.has(scenarioNameShards) && cfg.cpuprofile == "" {
		s, err := scenarioShards(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("shards: %w", err)
		}
		res.shards = &s
	}
	// Last: its 50,000 objects would weigh on every scenario after it.
	if cfg.has(scenarioNameNoisy) && cfg.cpuprofile == "" {
		n, err := scenarioNoisy(ctx, c, cfg, launcher)
		if err != nil {
			return fmt.Errorf("noisy: %w", err)
		}
		res.noisy = &n
	}
	return nil
}

// partialReport prints what a run that failed had measured, and writes it
// to partial-report.md in the artifacts, so that an hour of figures is not
// lost to the last scenario; the markdown file is left alone, as its
// section is for complete runs. It returns err.
func partialReport(res *results, err error) error {
	res.finished = time.Now()
	res.stoppedBy = err
	section := markdown(res)
	fmt.Println()
	fmt.Println(section)
	path := filepath.Join(res.cfg.artifacts, "partial-report.md")
	if werr := os.WriteFile(path, []byte(section), 0o644); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// measureRawLimit measures one raw limit into res.
func measureRawLimit(ctx context.Context, res *results, name string, measure func() (rawResult, error)) error {
	logger := klog.FromContext(ctx)
	logger.Info("Measuring the raw write limit", "scenario", name)
	rr, err := measure()
	if err != nil {
		return err
	}
	res.raw[name] = rr
	logger.Info("Raw limit", "scenario", name, "setsPerSecond", fmt.Sprintf("%.1f", rr.setsPerSecond()),
		"createsPerSecond", fmt.Sprintf("%.0f", rr.createsPerSecond()), "cpu", rr.cpu.String())
	return nil
}

// whilePaused runs f with the manager's process stopped (SIGSTOP), and
// continues it (SIGCONT) after f, whatever f returned.
func whilePaused(m manager, f func() error) error {
	pid := m.PID()
	if pid == os.Getpid() {
		return fmt.Errorf("cannot pause the in-process manager")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pausing the manager: %w", err)
	}
	ferr := f()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return errors.Join(ferr, fmt.Errorf("continuing the manager: %w", err))
	}
	return ferr
}

// runManagerScenarios runs scenarios 1-3 and 5 against one manager. raws
// holds the raw limits to measure right before their scenarios, with the
// manager paused.
func runManagerScenarios(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, res *results, raws map[string]func() (rawResult, error)) error {
	logger := klog.FromContext(ctx)
	baseObjects, _, err := c.cachedObjects(ctx)
	if err != nil {
		return err
	}
	baseManaged, err := c.managedObjects(ctx)
	if err != nil {
		return err
	}
	var m manager
	if cfg.cpuprofile != "" {
		im, err := startInProcessManager(ctx, c.config)
		if err != nil {
			return err
		}
		m = im
	} else {
		bm, err := startBinaryManager(ctx, l, "convergence", append([]string{"--leader-elect=false"}, cfg.managerArgs...)...)
		if err != nil {
			return err
		}
		m = bm
	}
	defer func() {
		code, err := m.Terminate(time.Minute)
		if err != nil || code != 0 {
			logger.Info("The convergence manager did not stop cleanly", "exitCode", code, "err", err)
		}
	}()
	if err := waitManagerReady(ctx, m, 5*time.Minute, 3*time.Second); err != nil {
		return err
	}
	mem := startMemorySampler(ctx, m)
	defer mem.close()
	baseHeap, baseRSS, _, _ := mem.read(ctx)

	scenarios := []struct {
		name string
		run  func(context.Context, *cluster, config, manager) (convergence, error)
	}{
		{scenarioNameApps, scenarioApps},
		{scenarioNamePipelines, scenarioPipelines},
		{scenarioNameIngress, scenarioIngress},
	}
	for _, s := range scenarios {
		if !cfg.has(s.name) {
			continue
		}
		if measure, ok := raws[s.name]; ok {
			if err := whilePaused(m, func() error { return measureRawLimit(ctx, res, s.name, measure) }); err != nil {
				return err
			}
			// It may have seen the raw objects come and go.
			if err := waitManagerReady(ctx, m, 5*time.Minute, 3*time.Second); err != nil {
				return err
			}
		}
		logger.Info("Measuring the manager", "scenario", s.name)
		var conv convergence
		var err error
		// The profile tells the benchmark's own client work apart by this label.
		pprof.Do(ctx, pprof.Labels("bench", "client"), func(ctx context.Context) {
			conv, err = s.run(ctx, c, cfg, m)
		})
		if err != nil {
			return err
		}
		res.conv[s.name] = conv
	}
	if cfg.cpuprofile != "" {
		var files []string
		for name := range res.conv {
			files = append(files, profilePath(cfg, name))
		}
		slices.Sort(files)
		res.profileNotes = fmt.Sprintf("CPU profiles of the in-process manager from the first create to convergence (this command's own clients labelled bench=client): %s; "+
			"see the manager alone with: go tool pprof -top -tagignore=bench=client FILE", strings.Join(files, ", "))
	}
	if cfg.has(scenarioNameMemory) && cfg.cpuprofile == "" {
		objects, byKind, err := c.cachedObjects(ctx)
		if err != nil {
			return err
		}
		managed, err := c.managedObjects(ctx)
		if err != nil {
			return err
		}
		heap, rss, peakHeap, peakRSS := mem.read(ctx)
		res.memory = &memoryResult{baseObjects: baseObjects, objects: objects, byKind: byKind, baseManaged: baseManaged, managed: managed,
			baseHeap: baseHeap, baseRSS: baseRSS, heap: heap, rss: rss, peakHeap: peakHeap, peakRSS: peakRSS}
	}
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
