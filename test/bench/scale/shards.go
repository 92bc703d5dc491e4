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
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
	"github.com/ndsl/controller-manager/pkg/shard"
	e2eframework "github.com/ndsl/controller-manager/test/e2e/framework"
)

// scenarioNameShards is scenario 12 (issue 24): the App controller split
// into N shards over N replicas, for each N of --shards-replicas.
const scenarioNameShards = "shards"

// shardsLeaseNamespace holds the shard and member Leases of every run.
const shardsLeaseNamespace = "bench-shards"

// shardsRun is one N: N replicas with --shards=S, S the largest N, so
// that a join moves units.
type shardsRun struct {
	replicas, shards, apps, namespaces int
	// perShard is how many Apps each shard's range holds.
	perShard []int
	// cachedObjects is, cluster-wide, what a manager of every controller
	// would cache once the Apps converged (cluster.cachedObjects).
	cachedObjects int
	// led is from the first replica's start to every unit led by its
	// assignee, one per replica.
	led time.Duration
	// converged is from the first create to the last App converged.
	converged time.Duration
	// writes are the replicas' writes, summed, until convergence: their
	// Lease renewals included (a PUT per led unit and per member Lease
	// every retry period).
	writes float64
	// peakRSS and rss are each replica's VmHWM and VmRSS once idle after
	// convergence; binary is its RssFile then: the pages of the executable
	// it has mapped, which every replica pays whatever its share.
	peakRSS, rss, binary []float64
	// heapFile, heapSummary and heapTop are the first replica's heap
	// profile once idle, after a GC: what its memory holds.
	heapFile, heapSummary string
	heapTop               []string
	// join, leave, kill and layout are the four moves.
	join, leave, kill, layout shardsMove
}

// shardsMove is one move of units between replicas: settled is from its
// cause (a start, SIGTERM, kill -9, the first SIGTERM of the roll) to every
// unit led by its assignee again; each moved unit's handover runs from its
// release (for kill -9: the kill; for a layout change: the old layout's
// last release) to its first reconcile on the receiver, by the managers'
// own clocks.
type shardsMove struct {
	what      string
	from      string // what a handover is timed from: "release" unless said
	settled   time.Duration
	moved     int
	handovers []time.Duration
	missing   []string
}

func (m shardsMove) String() string {
	from := m.from
	if from == "" {
		from = "release"
	}
	return fmt.Sprintf("%s: every unit led by its assignee after %s, %d moved, %s → first reconcile %s",
		m.what, secs(m.settled), m.moved, from, spanOf(m.handovers, m.missing))
}

// shardsResult is scenario 12.
type shardsResult struct {
	lease, renew, retry time.Duration
	runs                []shardsRun
	traffic             *leaseTraffic
}

// scenarioShards runs shardsOnce for each N of --shards-replicas, each on
// a namespace set of its own, deleted before the next, then the Lease
// traffic of --shards-lease-traffic shards.
func scenarioShards(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher) (shardsResult, error) {
	res := shardsResult{lease: cfg.leaseDuration, renew: cfg.renewDeadline, retry: cfg.retryPeriod}
	if err := c.createNamespace(ctx, shardsLeaseNamespace); err != nil {
		return res, err
	}
	history, err := watchLeaseHistory(ctx, c, shardsLeaseNamespace)
	if err != nil {
		return res, err
	}
	shards := cmp.Or(cfg.shardsCount, slices.Max(cfg.shardsReplicas))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	for _, n := range cfg.shardsReplicas {
		namespaces := balancedNamespaces(rng, cfg.shardsNamespaces, shards)
		run, err := shardsOnce(ctx, c, cfg, l, history, n, shards, namespaces)
		// The namespaces go whatever happened, or the next N would cache them.
		if derr := deleteNamespaces(ctx, c, namespaces, cfg.cleanupTimeout); err == nil {
			err = derr
		}
		if err != nil {
			return res, fmt.Errorf("%d replicas: %w", n, err)
		}
		res.runs = append(res.runs, run)
	}
	if cfg.shardsLeaseTraffic > 0 {
		t, err := measureLeaseTraffic(ctx, c, cfg, l, history)
		if err != nil {
			return res, fmt.Errorf("Lease traffic at %d shards: %w", cfg.shardsLeaseTraffic, err)
		}
		res.traffic = &t
	}
	return res, nil
}

// shardsArgs are the flags of a shards replica: the App controller alone,
// --shards=shards, the scenario's Lease timing, unit Leases named after
// group.
func shardsArgs(cfg config, shards int, group string) []string {
	return append([]string{
		"--leader-elect=true", "--leader-elect-per-controller", fmt.Sprintf("--shards=%d", shards), "--profiling",
		"--controllers=" + appcontroller.ControllerName,
		"--leader-elect-resource-namespace=" + shardsLeaseNamespace,
		"--leader-elect-resource-name=" + group,
		"--leader-elect-lease-duration=" + cfg.leaseDuration.String(),
		"--leader-elect-renew-deadline=" + cfg.renewDeadline.String(),
		"--leader-elect-retry-period=" + cfg.retryPeriod.String(),
	}, cfg.managerArgs...)
}

// shardsOnce measures N replicas with --shards=S: the units spread, the
// Apps converged, each replica's memory, then a join, a SIGTERM, a kill -9
// and a rolling change to --shards=S/2 (or 2, from 1).
func shardsOnce(ctx context.Context, c *cluster, cfg config, l *e2eframework.Launcher, history *leaseHistory, n, shards int, namespaces []string) (shardsRun, error) {
	logger := klog.FromContext(ctx)
	run := shardsRun{replicas: n, shards: shards, apps: cfg.shardsApps, namespaces: len(namespaces), perShard: appsPerShard(namespaces, cfg.shardsApps, shards)}
	phase := fmt.Sprintf("shards-%d-%d", n, time.Now().Unix())
	if err := parallel(ctx, len(namespaces), cfg.concurrency, func(ctx context.Context, i int) error {
		_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: namespaces[i], Labels: map[string]string{benchLabel: phase}}}, metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return run, fmt.Errorf("creating the namespaces: %w", err)
	}

	args := shardsArgs(cfg, shards, phase)
	var replicas []*binaryManager
	defer func() {
		for _, m := range replicas {
			_, _ = m.Terminate(time.Minute)
		}
	}()
	begin := time.Now()
	started := 0
	start := func(args []string) (*binaryManager, error) {
		started++
		m, err := startBinaryManager(ctx, l, fmt.Sprintf("shards%d-%d", n, started), args...)
		if err == nil {
			replicas = append(replicas, m)
		}
		return m, err
	}
	for range n {
		if _, err := start(args); err != nil {
			return run, err
		}
	}
	if _, err := waitUnitsSettled(ctx, replicas, nil, 5*time.Minute); err != nil {
		return run, err
	}
	run.led = time.Since(begin)
	logger.Info("Shards: every unit led by its assignee", "replicas", n, "shards", shards, "after", run.led)

	// Convergence: every App's status observed with all its children.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	t := newTracker(cfg.shardsApps)
	watchLabelledApps(watchCtx, c, phase, t)
	if _, err := settle(ctx, c, cfg); err != nil {
		return run, err
	}
	writes0 := totalWrites(ctx, replicas)
	created := time.Now()
	if err := parallel(ctx, cfg.shardsApps, cfg.concurrency, func(ctx context.Context, i int) error {
		app := newApp(i, 0) // no pods: the figure is the manager's, not kwok's
		app.Labels = map[string]string{benchLabel: phase}
		_, err := c.crd.AppV1().Apps(namespaces[i%len(namespaces)]).Create(ctx, app, metav1.CreateOptions{})
		return err
	}); err != nil {
		return run, fmt.Errorf("creating the Apps: %w", err)
	}
	if err := waitFor(ctx, t.allConverged, cfg.phaseTimeout); err != nil {
		done, _ := t.counts()
		return run, fmt.Errorf("%d of %d Apps converged within %s: %w", done, cfg.shardsApps, cfg.phaseTimeout, err)
	}
	run.converged = time.Since(created)
	run.writes = totalWrites(ctx, replicas) - writes0
	stopWatch()
	logger.Info("Shards: Apps converged", "replicas", n, "apps", cfg.shardsApps, "elapsed", run.converged.Round(time.Millisecond),
		"perSecond", fmt.Sprintf("%.1f", float64(cfg.shardsApps)/run.converged.Seconds()))

	if err := waitUnitsIdle(ctx, replicas, cfg.settleTimeout, 3*time.Second); err != nil {
		return run, err
	}
	for _, m := range replicas {
		hwm, _ := procStatusKB(m.PID(), "VmHWM")
		rss, _ := procStatusKB(m.PID(), "VmRSS")
		binary, _ := procStatusKB(m.PID(), "RssFile")
		run.peakRSS, run.rss, run.binary = append(run.peakRSS, hwm), append(run.rss, rss), append(run.binary, binary)
	}
	var err error
	if run.cachedObjects, _, err = c.cachedObjects(ctx); err != nil {
		return run, err
	}
	logger.Info("Shards: memory once idle", "replicas", n, "peakRSS", mibs(run.peakRSS), "rss", mibs(run.rss), "binary", mibs(run.binary), "cachedObjects", run.cachedObjects)
	run.heapFile = filepath.Join(cfg.artifacts, fmt.Sprintf("heap-shards-%d.pprof", n))
	if err := fetchProfile(ctx, replicas[0].Base()+"/debug/pprof/heap?gc=1", run.heapFile); err != nil {
		return run, fmt.Errorf("the heap profile of %s: %w", replicas[0].Name(), err)
	}
	if run.heapSummary, run.heapTop, err = heapTop(ctx, run.heapFile, profileTopEntries); err != nil {
		return run, err
	}

	// Join: one more replica; membership moves the units it is assigned.
	before, err := waitUnitsSettled(ctx, replicas, nil, time.Minute)
	if err != nil {
		return run, err
	}
	joined := time.Now()
	joiner, err := start(args)
	if err != nil {
		return run, err
	}
	if run.join, before, err = timeMove(ctx, "join", phase, history, replicas, nil, before, joined, nil); err != nil {
		return run, fmt.Errorf("after %s joined: %w", joiner.Name(), err)
	}

	// Leave: SIGTERM of the replica leading most units; it hands them over
	// as it drains.
	leaver := busiest(replicas, before)
	termed := time.Now()
	if _, err := leaver.Terminate(time.Minute); err != nil {
		return run, fmt.Errorf("SIGTERM of %s: %w", leaver.Name(), err)
	}
	replicas = slices.DeleteFunc(replicas, func(m *binaryManager) bool { return m == leaver })
	if run.leave, before, err = timeMove(ctx, "leave", phase, history, replicas, nil, before, termed, nil); err != nil {
		return run, fmt.Errorf("after SIGTERM of %s: %w", leaver.Name(), err)
	}

	// Kill -9 of the replica leading most units: its Leases expire. (From
	// one replica, the join and the leave leave one: another starts first.)
	if len(replicas) < 2 {
		if _, err := start(args); err != nil {
			return run, err
		}
		if before, err = waitUnitsSettled(ctx, replicas, nil, 5*time.Minute); err != nil {
			return run, err
		}
	}
	victim := busiest(replicas, before)
	killed := time.Now()
	victim.Kill()
	if run.kill, before, err = timeMove(ctx, "kill -9", phase, history, replicas, victim, before, killed, func(string) time.Time { return killed }, "kill"); err != nil {
		return run, fmt.Errorf("after kill -9 of %s: %w", victim.Name(), err)
	}
	replicas = slices.DeleteFunc(replicas, func(m *binaryManager) bool { return m == victim })

	// A layout change: every replica rolled, one at a time as a Deployment
	// rolls (its successor first), to half the shards; the new layout
	// leads once the old one's last replica is gone.
	to := max(shards/2, 2)
	if to == shards {
		to = 1
	}
	newArgs := shardsArgs(cfg, to, phase)
	rolled := time.Now()
	old := slices.Clone(replicas)
	for _, m := range old {
		successor, err := start(newArgs)
		if err != nil {
			return run, err
		}
		// A Deployment terminates the predecessor once the successor is
		// ready, a kubelet probe and a resync at least after it started;
		// the successor states its membership (its member Lease, which
		// the predecessor hands its shards over by) within a few hundred
		// milliseconds of its start. So the roll waits for that, not for
		// a fixed time.
		if err := waitJoined(ctx, successor, time.Minute); err != nil {
			return run, fmt.Errorf("rolling %s: %w", m.Name(), err)
		}
		if _, err := m.Terminate(time.Minute); err != nil {
			return run, fmt.Errorf("rolling %s: %w", m.Name(), err)
		}
		replicas = slices.DeleteFunc(replicas, func(r *binaryManager) bool { return r == m })
	}
	lastRelease := func(string) time.Time {
		var last time.Time
		for unit := range before {
			if at := history.released(unitLease(phase, unit), rolled); at.After(last) {
				last = at
			}
		}
		return last
	}
	if run.layout, _, err = timeMove(ctx, fmt.Sprintf("--shards=%d → %d", shards, to), phase, history, replicas, nil, nil, rolled, lastRelease, "the old layout's last release"); err != nil {
		return run, fmt.Errorf("after the roll to --shards=%d: %w", to, err)
	}
	return run, nil
}

// waitJoined waits until m lists itself among the live members (its member
// Lease written and seen).
func waitJoined(ctx context.Context, m *binaryManager, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := getDebug(ctx, m.Base())
		return err == nil && d.Identity != "" && slices.Contains(d.Members, d.Identity), nil
	})
}

// timeMove waits until every unit is led by its assignee among replicas
// (but skip), and times the units whose leader changed from before (all,
// if before is nil) since cause. from gives each unit's start point; nil:
// its Lease's release. It returns the move and who leads what now.
func timeMove(ctx context.Context, what, group string, history *leaseHistory, replicas []*binaryManager, skip *binaryManager,
	before map[string]string, cause time.Time, from func(unit string) time.Time, fromWhat ...string) (shardsMove, map[string]string, error) {
	move := shardsMove{what: what}
	if len(fromWhat) > 0 {
		move.from = fromWhat[0]
	}
	after, err := waitUnitsSettled(ctx, replicas, skip, 5*time.Minute)
	if err != nil {
		return move, nil, err
	}
	move.settled = time.Since(cause)
	logs := map[string]string{}
	for _, m := range replicas {
		logs[m.Name()] = m.LogPath()
	}
	moved := map[string]string{}
	for unit, r := range after {
		if before[unit] != r {
			moved[unit] = logs[r]
		}
	}
	if from == nil {
		from = func(unit string) time.Time { return history.released(unitLease(group, unit), cause) }
	}
	move.moved = len(moved)
	// A unit led and running logs its first reconcile a moment later.
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		move.handovers, move.missing, err = handoverTimes(moved, cause, from)
		return err != nil || len(move.missing) == 0, nil
	})
	if err != nil {
		return move, nil, err
	}
	klog.FromContext(ctx).Info("Shards: units moved", "move", move.String())
	return move, after, nil
}

// busiest is the replica leading most units in led, the first on a tie.
func busiest(replicas []*binaryManager, led map[string]string) *binaryManager {
	counts := map[string]int{}
	for _, r := range led {
		counts[r]++
	}
	var out *binaryManager
	for _, r := range replicas {
		if out == nil || counts[r.Name()] > counts[out.Name()] {
			out = r
		}
	}
	return out
}

// unitLease is the Lease of unit in group (the manager's controllerLease).
func unitLease(group, unit string) string { return group + "-" + unit }

// balancedNamespaces returns count namespace names, random 8-hex-digit
// prefixes, drawn until each of the shards ranges of the namespace hash
// holds as many (±1): the hash is uniform, but at a hundred names luck
// alone would skew one replica's share by a quarter.
func balancedNamespaces(rng *rand.Rand, count, shards int) []string {
	ranges := mustShards(shards)
	per := make([]int, shards)
	seen := map[string]bool{}
	out := make([]string, 0, count)
	for len(out) < count {
		name := fmt.Sprintf("%08x-bench-shards", rng.Uint32())
		i := shardOf(ranges, name)
		// Shard i may take one more than its even share only while the
		// earlier ones fill: ceil for the first count%shards shards.
		limit := count / shards
		if i < count%shards {
			limit++
		}
		if seen[name] || per[i] >= limit {
			continue
		}
		seen[name] = true
		per[i]++
		out = append(out, name)
	}
	return out
}

// appsPerShard counts the Apps of each shard when App i goes to
// namespaces[i % len(namespaces)].
func appsPerShard(namespaces []string, apps, shards int) []int {
	ranges := mustShards(shards)
	per := make([]int, shards)
	for i := range apps {
		per[shardOf(ranges, namespaces[i%len(namespaces)])]++
	}
	return per
}

// mustShards is the ranges of --shards=n, n at least 1 (validated).
func mustShards(n int) []shard.Shard {
	ranges, err := shard.All(n)
	if err != nil {
		panic(err)
	}
	return ranges
}

// shardOf is the index of the range namespace hashes into.
func shardOf(ranges []shard.Shard, namespace string) int {
	for i, r := range ranges {
		if r.ContainsNamespace(namespace) {
			return i
		}
	}
	panic("no shard range contains " + namespace) // the ranges cover the hash space
}

// replicaView is one replica's /debug/controllers.
type replicaView struct {
	name, identity string
	members        []string
	synced         bool
	// leads are the units it leads and runs; assigned is, as it sees membership,
	// the identity each unit is assigned to.
	leads    []string
	assigned map[string]string
}

// unitsLed maps each unit to the replica leading it; ok when every unit
// (as the replicas list them) is led by exactly one.
func unitsLed(views []replicaView) (map[string]string, bool) {
	led := map[string]string{}
	units := map[string]bool{}
	for _, v := range views {
		for u := range v.assigned {
			units[u] = true
		}
		for _, u := range v.leads {
			if _, dup := led[u]; dup {
				return nil, false // a handover between two polls of ours
			}
			led[u] = v.name
		}
	}
	for u := range units {
		if led[u] == "" {
			return nil, false
		}
	}
	return led, len(units) > 0
}

// settledDivision maps each unit to the replica leading it; ok when the
// replicas agree on who is live, each unit is led by the replica every one
// of them assigns it to, and the replicas lead as many units each, or one
// more.
func settledDivision(views []replicaView) (map[string]string, bool) {
	led, ok := unitsLed(views)
	if !ok {
		return nil, false
	}
	identities := make([]string, 0, len(views))
	nameOf := map[string]string{}
	for _, v := range views {
		identities = append(identities, v.identity)
		nameOf[v.identity] = v.name
	}
	slices.Sort(identities)
	for _, v := range views {
		members := slices.Sorted(slices.Values(v.members))
		if !v.synced || !slices.Equal(members, identities) {
			return nil, false
		}
		for u, id := range v.assigned {
			if nameOf[id] != led[u] {
				return nil, false
			}
		}
	}
	counts := map[string]int{}
	for _, r := range led {
		counts[r]++
	}
	lo, hi := len(led), 0
	for _, v := range views {
		lo, hi = min(lo, counts[v.name]), max(hi, counts[v.name])
	}
	return led, hi-lo <= 1
}

// readViews reads the /debug/controllers of the replicas other than skip.
func readViews(ctx context.Context, replicas []*binaryManager, skip *binaryManager) ([]replicaView, error) {
	views := make([]replicaView, 0, len(replicas))
	for _, m := range replicas {
		if m == skip {
			continue
		}
		if exited, err := m.Exited(); exited {
			return nil, fmt.Errorf("manager %s exited (%v); log:\n%s", m.Name(), err, m.LogTail())
		}
		d, err := getDebug(ctx, m.Base())
		if err != nil {
			return nil, nil // not serving yet: the caller polls again
		}
		v := replicaView{name: m.Name(), identity: d.Identity, members: d.Members, synced: d.Synced, assigned: map[string]string{}}
		for _, cs := range d.Controllers {
			v.assigned[cs.Name] = cs.AssignedTo
			// Led and working: its shard built and its workers started.
			if cs.Leading && cs.Running && cs.QueueDepth != nil {
				v.leads = append(v.leads, cs.Name)
			}
		}
		views = append(views, v)
	}
	return views, nil
}

// waitUnitsSettled polls the replicas other than skip until settledDivision
// says so, and returns who leads which unit.
func waitUnitsSettled(ctx context.Context, replicas []*binaryManager, skip *binaryManager, timeout time.Duration) (map[string]string, error) {
	var led map[string]string
	var last []replicaView
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		views, err := readViews(ctx, replicas, skip)
		if err != nil || views == nil {
			return false, err
		}
		last = views
		var ok bool
		led, ok = settledDivision(views)
		return ok, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for every unit to be led by its assignee, evenly (last seen %+v): %w", last, err)
	}
	return led, nil
}

// waitUnitsIdle waits until every unit each replica leads runs with an
// empty queue and no replica has reconciled for quietFor.
func waitUnitsIdle(ctx context.Context, replicas []*binaryManager, timeout, quietFor time.Duration) error {
	last, lastChange := -1.0, time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, m := range replicas {
			d, err := getDebug(ctx, m.Base())
			if err != nil {
				return false, nil
			}
			for _, cs := range d.Controllers {
				if cs.Leading && (!cs.Running || cs.QueueDepth == nil || *cs.QueueDepth != 0) {
					return false, nil
				}
			}
		}
		// Reconciles, not writes: every replica renews its Leases.
		if r := totalReconciles(ctx, replicas); r != last {
			last, lastChange = r, time.Now()
		}
		return time.Since(lastChange) >= quietFor, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the shard replicas to be idle: %w", err)
	}
	return nil
}

// totalWrites sums the replicas' writes; one it cannot scrape counts 0.
func totalWrites(ctx context.Context, replicas []*binaryManager) float64 {
	var sum float64
	for _, m := range replicas {
		if ct, err := m.Counters(ctx); err == nil {
			sum += ct.Writes
		}
	}
	return sum
}

// totalReconciles sums the replicas' reconciles.
func totalReconciles(ctx context.Context, replicas []*binaryManager) float64 {
	var sum float64
	for _, m := range replicas {
		if ct, err := m.Counters(ctx); err == nil {
			sum += ct.Reconciles
		}
	}
	return sum
}

// watchLabelledApps feeds t, keyed namespace/name, from the Apps of every
// namespace labelled with phase.
func watchLabelledApps(ctx context.Context, c *cluster, phase string, t *tracker) {
	factory := crdinformers.NewSharedInformerFactoryWithOptions(c.crd, 0,
		crdinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchLabel + "=" + phase }))
	feed(ctx, factory, factory.App().V1().Apps().Informer(), func(a *appv1.App) {
		conv, ready := appConverged(a)
		t.observe(a.Namespace+"/"+a.Name, conv, ready)
	})
}

// deleteNamespaces deletes the namespaces at once and waits until all are
// gone.
func deleteNamespaces(ctx context.Context, c *cluster, namespaces []string, timeout time.Duration) error {
	return parallel(ctx, len(namespaces), len(namespaces), func(ctx context.Context, i int) error {
		return c.deleteNamespace(ctx, namespaces[i], timeout)
	})
}

// maxMean is the largest and the mean of xs.
func maxMean(xs []float64) (hi, mean float64) {
	for _, x := range xs {
		hi, mean = max(hi, x), mean+x
	}
	if len(xs) > 0 {
		mean /= float64(len(xs))
	}
	return hi, mean
}

// peakData is each replica's peak RSS less its binary's pages: what its
// share of the work costs, which the target's 1/N is about.
func peakData(r shardsRun) []float64 {
	out := make([]float64, len(r.peakRSS))
	for i := range r.peakRSS {
		out[i] = r.peakRSS[i] - r.binary[i]
	}
	return out
}

// mibs is "87 MiB, 91 MiB".
func mibs(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = mib(x)
	}
	return strings.Join(parts, ", ")
}

// shardsRows are scenario 12's rows, one per N, each set beside the first
// run's (N = 1, if it ran) and timebertt's published figures, and the Lease
// traffic's; and issue 36's verdicts.
func shardsRows(s *shardsResult) ([]row, []verdict) {
	var rows []row
	var verdicts []verdict
	var onePeak, oneData float64
	for _, r := range s.runs {
		peakMax, peakMean := maxMean(r.peakRSS)
		rssMax, rssMean := maxMean(r.rss)
		binaryMax, _ := maxMean(r.binary)
		data := peakData(r)
		dataMax, _ := maxMean(data)
		if r.replicas == 1 {
			onePeak, oneData = peakMax, dataMax
		}
		ratio := "—"
		if onePeak > 0 && r.replicas > 1 {
			bound := onePeak/float64(r.replicas) + 25<<20
			ratio = fmt.Sprintf("peak per replica / 1 replica's: max %.0f%%, mean %.0f%% (target: 1 replica's / %d + 25 MiB = %s); "+
				"less each one's binary pages (%s at most, which do not divide): max %s against 1 replica's %s / %d + 25 MiB = %s",
				100*peakMax/onePeak, 100*peakMean/onePeak, r.replicas, mib(bound),
				mib(binaryMax), mib(dataMax), mib(oneData), r.replicas, mib(oneData/float64(r.replicas)+25<<20))
			verdicts = append(verdicts, verdict{fmt.Sprintf("Shards: each of %d replicas peaks ≤ 1 replica's / %d + 25 MiB (%d cached objects)", r.replicas, r.replicas, r.cachedObjects),
				peakMax <= bound, fmt.Sprintf("%s (max of %s) against %s", mib(peakMax), mibs(r.peakRSS), mib(bound))})
		}
		var slowest time.Duration
		for _, m := range []shardsMove{r.join, r.leave, r.layout} {
			if n := len(m.handovers); n > 0 {
				slowest = max(slowest, m.handovers[n-1])
			}
		}
		verdicts = append(verdicts,
			verdict{fmt.Sprintf("Shards, %d replica(s): a moved unit's release → its first reconcile on the receiver ≤ 0.5 s (join, leave, layout change)", r.replicas),
				slowest <= 500*time.Millisecond && len(r.join.missing)+len(r.leave.missing)+len(r.layout.missing) == 0, millis(slowest)},
			verdict{fmt.Sprintf("Shards, %d replica(s): kill -9 of a holder, every unit led again ≤ lease duration + 1 s", r.replicas),
				r.kill.settled <= s.lease+time.Second, secs(r.kill.settled)})
		rows = append(rows, row{
			number:   fmt.Sprintf("12.%d", r.replicas),
			scenario: fmt.Sprintf("Shards: %d replica(s) with --shards=%d, App controller only; a join, a leave, a kill -9, a layout change", r.replicas, r.shards),
			size: fmt.Sprintf("%d Apps (0 pods, Service + Ingress) in %d namespaces, per shard %s; %d cached objects cluster-wide; lease %s, renew %s, retry %s",
				r.apps, r.namespaces, joinInts(r.perShard), r.cachedObjects, s.lease, s.renew, s.retry),
			raw: fmt.Sprintf("every unit led by its assignee %s after the first start", secs(r.led)),
			manager: fmt.Sprintf("converged in %s (%.1f Apps/s); per replica once idle: peak RSS max %s, mean %s; RSS max %s, mean %s (%s); of it the binary's pages (RssFile) %s",
				secs(r.converged), float64(r.apps)/r.converged.Seconds(), mib(peakMax), mib(peakMean), mib(rssMax), mib(rssMean), mibs(r.peakRSS), mibs(r.binary)),
			ratio:  ratio,
			writes: fmt.Sprintf("%.2f writes per App until convergence, all replicas, Lease renewals included", r.writes/float64(r.apps)),
			where: fmt.Sprintf("%s; %s; %s; %s. timebertt/kubernetes-controller-sharding published 3 shards at 87–115 MiB each vs 1 replica peaking at 278 MiB (a central sharder and a labelling webhook); here %d replica(s) peak at %s max",
				r.join, r.leave, r.kill, r.layout, r.replicas, mib(peakMax)),
		})
	}
	if t := s.traffic; t != nil {
		rows = append(rows, row{
			number:   "12.L",
			scenario: fmt.Sprintf("Shards: Lease traffic of %d replicas with --shards=%d, no Apps", leaseTrafficReplicas, t.shards),
			size:     fmt.Sprintf("%d unit Leases and %d member Leases; window %s; lease %s, renew %s, retry %s", t.shards, leaseTrafficReplicas, t.window, s.lease, s.renew, s.retry),
			raw:      fmt.Sprintf("every unit led by its assignee %s after the first start", secs(t.led)),
			manager:  "Lease requests beyond the control plane's own: " + t.rates(),
			ratio:    "—",
			writes:   fmt.Sprintf("%.1f Lease writes/s seen by a watch of the namespace", t.writesSeen),
			where:    fmt.Sprintf("%d holder changes in the window (each a lost renewal)", t.holderChanges),
		})
		verdicts = append(verdicts, verdict{fmt.Sprintf("Shards: %d replicas with --shards=%d hold every Lease for %s, no renewal lost", leaseTrafficReplicas, t.shards, t.window),
			t.holderChanges == 0, fmt.Sprintf("%d holder changes; %s", t.holderChanges, t.rates())})
	}
	return rows, verdicts
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, "-")
}

// parseShardsReplicas parses --shards-replicas: replica counts, each a
// valid --shards (1 to 64), none twice.
func parseShardsReplicas(s string) ([]int, error) {
	var counts []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 || slices.Contains(counts, n) {
			return nil, fmt.Errorf("--shards-replicas: %q is not a new count from 1 to 64", f)
		}
		counts = append(counts, n)
	}
	return counts, nil
}
