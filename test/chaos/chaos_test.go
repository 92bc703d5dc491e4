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
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// Bounds of the phases around the faults.
const (
	setupTimeout  = 5 * time.Minute
	leaderTimeout = 45 * time.Second
	// quietWindow is how long the converged world is watched for writes
	// and exits: nothing changes, so the managers must write nothing.
	quietWindow = 10 * time.Second
	// statusWritesPerChange bounds an owner's status writes per real
	// change (its creation, each of the suite's actions on it or its
	// children): a change moves status through at most Progressing,
	// partly available and Ready, plus one for observedGeneration. A spec
	// edit counts as two changes: its rollout scales a new ReplicaSet up
	// and the old one down, and status follows both (see disturbOwner).
	statusWritesPerChange = 4
)

// TestChaos runs the managers under the seeded fault schedule and asserts
// the invariants of issue 12. See the package comment.
func TestChaos(t *testing.T) {
	// It skips exactly where test/e2e skips the tests that need the same
	// things: manager processes it can signal, and the local control
	// plane, whose API server and etcd it restarts and whose audit log it
	// reads. Without E2E_MANAGER_BINARY it fails, as test/e2e does.
	if e2e := framework.ConfigFromEnv(); e2e.InClusterManager() {
		t.Skipf("needs manager processes; %s=%s", framework.EnvManager, e2e.Manager)
	} else if e2e.UseExistingCluster {
		t.Skipf("restarts kube-apiserver and etcd and reads their audit log: only on the local control plane; %s=true",
			framework.EnvUseExistingCluster)
	}
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	// The CI mode, unless told which, runs every Lease mode: a single
	// Lease; a Lease per controller, whose replicas hand controllers over
	// as they join and leave (membership); and two shards of each
	// shardable controller, each audited against its own Lease.
	if cfg.mode == "ci" && os.Getenv(envLeases) == "" && os.Getenv(envShards) == "" {
		for _, mode := range []struct {
			name          string
			perController bool
			shards        int
		}{{"single", false, 1}, {"per-controller", true, 1}, {"shards", true, 2}} {
			c := cfg
			c.perController, c.shards = mode.perController, mode.shards
			if c.artifacts != "" && mode.name != "single" {
				c.artifacts = filepath.Join(c.artifacts, mode.name)
			}
			// Side by side: each has its own control plane, managers and
			// stand-ins, and CI's wall time is this package's.
			t.Run(mode.name, func(t *testing.T) { t.Parallel(); runChaos(t, c) })
		}
		return
	}
	runChaos(t, cfg)
}

// runChaos is one run of the managers under cfg's fault schedule.
func runChaos(t *testing.T, cfg config) {
	var err error
	steps := schedule(cfg.seed, cfg.duration, cfg.gap, cfg.faults)
	t.Logf("chaos %s mode, seed %d (replay: %s=%s %s=%d), load: %d Apps, %d Pipelines, %d annotated Services, %d+%d blockers; lease %v/%v/%v; %d steps:\n%s",
		cfg.mode, cfg.seed, envMode, cfg.mode, envSeed, cfg.seed, cfg.apps, cfg.pipelines, cfg.services, cfg.blockers, cfg.blockers,
		leaseDuration, renewDeadline, retryPeriod, len(steps), describeSchedule(steps))

	for k, why := range pendingFaults {
		if !scheduled(steps, k) {
			t.Logf("NOT SCHEDULED (pending, %s=true runs it): %s: %s", envIncludePending, k, why)
		}
	}
	ctx := klog.NewContext(context.Background(), klog.Background())
	logger := klog.FromContext(ctx)
	dir := cfg.artifacts
	if dir == "" {
		dir = t.TempDir()
	} else if dir, err = filepath.Abs(dir); err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(dir, "managers")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()

	setupCtx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	cluster, err := framework.SetupLocal(setupCtx, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true,
		Dir: filepath.Join(dir, "controlplane"), AuditPolicy: auditPolicy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := cluster.InstallManifests(setupCtx); err != nil {
		t.Fatal(err)
	}
	// The managers run with --app-invert-enable-ingress=false; where the
	// admission policies admit Apps, the inversion is their binding's
	// (docs/apis.md), which an install without it leaves out.
	if err := cluster.Kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(setupCtx, "ndsl-app-defaulting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.ScaleInClusterManager(setupCtx, 0); err != nil {
		t.Fatal(err)
	}
	var kubeconfigs []string
	for slot := range cfg.managers {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: slotAccount(slot)}}
		if _, err := cluster.Kube.CoreV1().ServiceAccounts(framework.ManagerNamespace).Create(setupCtx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		path := kubeconfigPath(dir, slot)
		if err := cluster.WriteServiceAccountKubeconfig(setupCtx, framework.ManagerNamespace, slotAccount(slot), path, 4*time.Hour); err != nil {
			t.Fatal(err)
		}
		kubeconfigs = append(kubeconfigs, path)
	}
	if err := grantManagerRBAC(setupCtx, cluster, cfg.managers); err != nil {
		t.Fatal(err)
	}
	observer, err := cluster.ObserverToken(setupCtx, 4*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	launcher := framework.NewLauncher(cfg.binary, kubeconfigs[0], logDir)
	launcher.Args, launcher.Token = framework.SuiteArgs, observer
	sup := newSupervisor(launcher, kubeconfigs, cfg)
	// The webhooks are on, as installed: every process serves them behind a
	// stand-in for the webhook Service that routes by readiness, the API
	// server calls them for every App and Pipeline write, and converts
	// through them for every read of apps v1 (the namespace controller's
	// included).
	svc, err := newWebhookService(sup.processes)
	if err != nil {
		t.Fatal(err)
	}
	launcher.Webhooks = svc
	if err := cluster.PointWebhooksAt(setupCtx, "https://"+svc.Addr()); err != nil {
		t.Fatal(err)
	}
	skew, err := newSkewServer()
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	t.Cleanup(func() {
		stopRun()
		sup.stop()
		launcher.Close()
		_ = svc.Close()
		_ = skew.Close()
	})
	go svc.probe(runCtx)
	if err := sup.start(setupCtx, runCtx); err != nil {
		t.Fatal(err)
	}
	w := newWorld(cluster, cfg)
	x := &runner{w: w, sup: sup, svc: svc, skew: skew}
	if _, _, err := x.waitLeader(setupCtx); err != nil {
		t.Fatal(err)
	}
	if err := waitWebhooksServing(setupCtx, cluster); err != nil {
		t.Fatal(err)
	}
	if err := w.createLoad(setupCtx, rand.New(rand.NewPCG(cfg.seed, 0x10ad))); err != nil {
		t.Fatal(err)
	}
	t.Logf("setup and load done in %v (artifacts in %s)", time.Since(begin).Round(time.Second), dir)

	// The fault phase: steps in order, each at its time or right after the
	// previous one ends.
	faultStart := time.Now()
	for i, s := range steps {
		if d := time.Until(faultStart.Add(s.at)); d > 0 {
			time.Sleep(d) // the schedule's own clock, not a wait for a condition
		}
		logger.Info("Fault step", "index", i, "step", s.String())
		if err := x.run(runCtx, s); err != nil {
			t.Fatalf("step %d (%s): %v", i, s, err)
		}
	}
	// Blockers go last, after the retry budget of the last leader when
	// the mode holds them that long: their owners' keys have then been
	// given up on, and only a watch on the blocker brings them back.
	if cfg.blockerHold > 0 {
		w.logf("holding the blockers %v more, with no fault", cfg.blockerHold)
		time.Sleep(cfg.blockerHold) // the hold is the scenario, not a wait for a condition
	}
	if err := w.releaseBlockers(runCtx); err != nil {
		t.Fatal(err)
	}
	faultsEnd := time.Now()
	t.Logf("fault phase: %d steps in %v", len(steps), faultsEnd.Sub(faultStart).Round(time.Second))

	// Convergence within the stated bound.
	var last []string
	var lastErr error
	err = wait.PollUntilContextTimeout(runCtx, 2*time.Second, cfg.convergeBound, true, func(ctx context.Context) (bool, error) {
		snap, err := w.snapshot(ctx)
		if err != nil {
			lastErr = err // the problems of the last snapshot taken still stand
			return false, nil
		}
		last = snap.problems()
		if p, holder, err := sup.leader(ctx, cluster); err != nil {
			last = append(last, "the Lease: "+err.Error())
		} else if p == nil {
			last = append(last, fmt.Sprintf("the Lease: held by %q, no running manager", holder))
		}
		return len(last) == 0, nil
	})
	converged := time.Now()
	convergence := converged.Sub(faultsEnd)
	f := figures{seed: cfg.seed, mode: cfg.mode, steps: len(steps), faultPhase: faultsEnd.Sub(faultStart), convergence: convergence}
	w.mu.Lock()
	f.byKind = maps.Clone(w.actions)
	w.mu.Unlock()
	if err != nil {
		f.converged = false
		t.Errorf("not converged %v after the last fault (bound %v); %d problems in the last snapshot (last error taking one: %v):\n  %s",
			convergence.Round(time.Second), cfg.convergeBound, len(last), lastErr, strings.Join(head(last, 40), "\n  "))
	} else {
		f.converged = true
		t.Logf("converged %v after the last fault (bound %v)", convergence.Round(100*time.Millisecond), cfg.convergeBound)
	}

	// The quiet window: once the last changes (pods becoming available,
	// which status reports) have played out, a converged world gives the
	// managers nothing to do: quietWindow without a single manager write
	// must come within the rest of the bound.
	exitsBefore := len(sup.recordedExits())
	var quietStart, quietEnd time.Time
	quietDeadline := max(cfg.convergeBound-convergence, 30*time.Second)
	err = wait.PollUntilContextTimeout(runCtx, time.Second, quietDeadline+quietWindow, true, func(ctx context.Context) (bool, error) {
		events, err := readAudit(cluster.ControlPlane.AuditLogPath())
		if err != nil {
			return false, err
		}
		quietStart = converged
		for i := range events {
			if e := &events[i]; userSlot(e.User.Username) >= 0 && e.isWrite() && !e.isLease() && e.received().After(quietStart) {
				quietStart = e.received()
			}
		}
		quietEnd = time.Now()
		return quietEnd.Sub(quietStart) >= quietWindow, nil
	})
	f.quietAfter = quietStart.Sub(converged)
	if err != nil {
		t.Errorf("the managers never stopped writing for %v after convergence (last write %v after it): %v",
			quietWindow, f.quietAfter.Round(100*time.Millisecond), err)
	} else {
		t.Logf("quiet: no manager write for %v, starting %v after convergence", quietWindow, f.quietAfter.Round(100*time.Millisecond))
	}
	exits := sup.recordedExits()

	events, err := readAudit(cluster.ControlPlane.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	f.skewedWrites = skew.mutated.Load()
	failed, err := failedReconciles(logDir)
	if err != nil {
		t.Error(err)
	}
	f.analyse(t, w, events, exits, exitsBefore, quietEnd, failed)
	stopRun()
	sup.stop()

	w.mu.Lock()
	t.Logf("what the suite did:\n  %s", strings.Join(w.log, "\n  "))
	w.mu.Unlock()
	t.Logf("%s", f.summary())
	if cfg.report != "" {
		if err := f.appendRow(cfg.report); err != nil {
			t.Error(err)
		}
	}
	t.Logf("total %v", time.Since(begin).Round(time.Second))
}

func scheduled(steps []step, k faultKind) bool {
	return slices.ContainsFunc(steps, func(s step) bool { return s.kind == k })
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clone(s[:n]), fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}

// figures are one run's numbers, printed and optionally appended to the
// report file.
type figures struct {
	seed                    uint64
	mode                    string
	steps                   int
	byKind                  map[faultKind]int // steps carried out, per kind
	faultPhase, convergence time.Duration
	quietAfter              time.Duration // from convergence to the last write before the quiet window
	converged               bool
	writes, statusWrites    int
	writesBySlot            map[int]int
	holderChanges           int
	exits, leaseLostExits   int
	killed, terminated      int // by kill -9, by SIGTERM (rollouts and the like)
	inFlightAfterTheft      int
	failedPastDeadline      int
	leases                  int // Leases in the audit log
	secretWrites            int // of the webhook certificate Secret
	rolloutCreates          int // the rollout clients' requests and failures
	rolloutLists            int
	rolloutFailures         int
	skewedWrites            int64               // Lease writes the skew webhook shifted
	violations              map[string][]string // invariant -> findings
}

func (f *figures) violate(invariant, format string, args ...any) {
	if f.violations == nil {
		f.violations = map[string][]string{}
	}
	f.violations[invariant] = append(f.violations[invariant], fmt.Sprintf(format, args...))
}

// analyse applies the invariants that the audit log and the exits decide.
func (f *figures) analyse(t *testing.T, w *world, events []auditEvent, exits []exit, exitsBefore int, quietEnd time.Time, failed map[objectKey]int) {
	t.Helper()
	leases := leaseTimelines(events)
	if target := leases[w.cfg.targetLease()]; target == nil || len(target.writes) == 0 {
		t.Errorf("the audit log has no write of Lease %s: the audit policy or the log is broken", w.cfg.targetLease())
	} else {
		f.holderChanges = target.holderChanges()
	}
	f.leases = len(leases)
	for _, l := range leases {
		for _, v := range l.liveTakeovers() {
			f.violate("double leadership", "%s", v)
		}
	}
	f.writesBySlot = map[int]int{}
	statusWrites := map[objectKey]int{}
	w.mu.Lock()
	users := slices.Clone(w.user)
	disturbed := map[objectKey]int{}
	for k, v := range w.disturbed {
		disturbed[k] = v
	}
	// A Pipeline's creation is one change per step besides its storage:
	// each step is a Deployment rolling out, as an App's is.
	created := map[objectKey]int{}
	for _, p := range w.pipelineSteps {
		created[p.key] = p.steps
	}
	w.mu.Unlock()
	for i := range events {
		e := &events[i]
		slot := userSlot(e.User.Username)
		if slot < 0 || e.ObjectRef == nil || !e.isWrite() || e.isLease() || e.received().After(quietEnd) {
			continue
		}
		f.writes++
		f.writesBySlot[slot]++
		key := e.key()
		if key == (objectKey{"secrets", framework.ManagerNamespace, webhookCertSecret}) && e.ok() {
			f.secretWrites++
		}
		// Judged against the covering Lease the writer held, if any: the
		// single Lease or the controller's own, as its layout has it.
		names := coveringLeases(e)
		if len(names) == 0 {
			f.violate("write covered by no Lease", "%s (user agent %q)", e, e.UserAgent)
			continue
		}
		// Of the candidates, the best verdict; on a tie, the Lease the
		// writer wrote last.
		verdict, why, name := notHeld, "", ""
		var wroteLast time.Time
		for _, n := range names {
			lease := leases[n]
			if lease == nil {
				continue
			}
			v, w := lease.judge(e.User.Username, e.received())
			wrote := lease.lastWrite(e.User.Username, e.received())
			if name == "" || v < verdict || v == verdict && wrote.After(wroteLast) {
				verdict, why, name, wroteLast = v, w, n, wrote
			}
		}
		if name == "" {
			f.violate("write without the Lease", "%s: none of Leases %v was ever written", e, names)
			continue
		}
		if other := otherLayoutLeading(leases, name, e); other != "" {
			f.violate("two Lease layouts leading", "%s under Lease %s: %s", e, name, other)
		}
		if outside := outsideShard(name, e); outside != "" {
			f.violate("write outside its shard", "%s under Lease %s: %s", e, name, outside)
		}
		switch verdict {
		case pastDeadline:
			if e.ok() {
				f.violate("write without the Lease", "%s: %s", e, why)
			} else {
				f.failedPastDeadline++
			}
		case notHeld:
			f.violate("write without the Lease", "%s: %s", e, why)
		case lateAfterTheft:
			f.violate("write after a stolen Lease past the retry period", "%s: %s", e, why)
		case inFlightAfterTheft:
			f.inFlightAfterTheft++
		}
		if e.ObjectRef.Subresource == "status" && e.ok() {
			f.statusWrites++
			statusWrites[key]++
		}
		// A create, or an apply answered 201 Created, found nothing
		// there to touch.
		if e.Verb != "create" && e.ok() && e.ResponseStatus.Code != 201 {
			for _, u := range users {
				if u.key == key && e.received().After(u.created) && (u.deleted.IsZero() || e.received().Before(u.deleted)) {
					f.violate("user-owned object touched", "%s", e)
				}
			}
		}
	}
	for key, n := range statusWrites {
		owner := key
		if owner.resource == "pipelines" {
			owner.namespace = ""
		}
		changes := 1 + disturbed[owner] + created[owner]
		// A failed reconcile's status says so, once (sync's "failures
		// included"): a child write cancelled by the lease guard when the
		// API server, overloaded, answered after the renew deadline.
		if bound := statusWritesPerChange*changes + failed[owner]; n > bound {
			f.violate("status flapping", "%s: %d status writes for %d changes and %d failed reconciles (bound %d)", key, n, changes, failed[owner], bound)
		}
	}
	// The certificate Secret: one writer at a time, and a certificate that
	// covers a replica's names is kept, so replicas with different names
	// cost a write each, not a loop.
	w.mu.Lock()
	certChanges := len(w.certNames)
	rollouts := slices.Clone(w.rollouts)
	w.mu.Unlock()
	if bound := 1 + certSecretWritesPerChange*certChanges; f.secretWrites > bound {
		f.violate("certificate Secret rewritten", "%d writes of Secret %s/%s for %d replicas with other names (bound %d)",
			f.secretWrites, framework.ManagerNamespace, webhookCertSecret, certChanges, bound)
	}
	for _, r := range rollouts {
		f.rolloutCreates += r.creates
		f.rolloutLists += r.lists
		f.rolloutFailures += len(r.failures)
		for _, failure := range r.failures {
			f.violate("failed client request during a rollout", "%s", failure)
		}
	}
	for i, e := range exits {
		if e.terminated {
			f.terminated++
			// A process that had lost its Lease before the SIGTERM reached
			// it (an API server restart just before) exits 1 as it must.
			if e.code != 0 && !e.leaseLost {
				f.violate("unclean exit after SIGTERM", "%s exited (%s) at %s after the suite's SIGTERM, want 0", e.name, e.description,
					e.at.UTC().Format("15:04:05.000"))
			}
			continue
		}
		if e.killed {
			f.killed++
			continue
		}
		f.exits++
		if e.leaseLost {
			f.leaseLostExits++
		} else {
			f.violate("crash", "%s exited (%s) at %s without losing its Lease", e.name, e.description, e.at.UTC().Format("15:04:05.000"))
		}
		if i >= exitsBefore {
			f.violate("crash", "%s exited (%s) after convergence", e.name, e.description)
		}
	}
	names := make([]string, 0, len(f.violations))
	for name := range f.violations {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := f.violations[name]
		t.Errorf("invariant %q violated %d times:\n  %s", name, len(v), strings.Join(head(v, 15), "\n  "))
	}
}

func (f *figures) violationCount() int {
	n := 0
	for _, v := range f.violations {
		n += len(v)
	}
	return n
}

func (f *figures) summary() string {
	return fmt.Sprintf("figures: mode %s seed %d: %d fault steps (%s) over %v; converged %v in %v; manager writes %d (per slot %v), status writes %d; "+
		"Lease holder changes %d (%d Leases audited); exits after Lease loss %d, other exits %d, killed by the suite %d, SIGTERM by the suite %d; "+
		"writes in flight after a theft %d; failed writes received past the renew deadline %d; certificate Secret writes %d; rollout clients: %d creates and %d v1 lists, %d failed; "+
		"Lease writes skewed %d; violations %d",
		f.mode, f.seed, f.steps, f.kinds(), f.faultPhase.Round(time.Second), f.converged, f.convergence.Round(100*time.Millisecond), f.writes, f.writesBySlot,
		f.statusWrites, f.holderChanges, f.leases, f.leaseLostExits, f.exits-f.leaseLostExits, f.killed, f.terminated, f.inFlightAfterTheft,
		f.failedPastDeadline, f.secretWrites, f.rolloutCreates, f.rolloutLists, f.rolloutFailures, f.skewedWrites, f.violationCount())
}

// kinds is the steps carried out per kind, in the schedule's kind order.
func (f *figures) kinds() string {
	var parts []string
	for k := range numFaultKinds {
		if n := f.byKind[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return strings.Join(parts, ", ")
}

// appendRow appends the figures as a Markdown table row.
func (f *figures) appendRow(path string) error {
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer file.Close()
	_, err = fmt.Fprintf(file, "| %s | %d | %d (%s) | %v | %d | %d | %d | %d | %v | %d |\n", f.mode, f.seed, f.steps, f.kinds(), f.faultPhase.Round(time.Second),
		f.writes, f.statusWrites, f.holderChanges, f.leaseLostExits, f.convergence.Round(100*time.Millisecond), f.violationCount())
	return err
}

// waitWebhooksServing waits until the API server calls the webhooks: an App
// created with dryRun is admitted and apps v1 are listed (converted), once
// a replica has written the certificate and the caBundles.
func waitWebhooksServing(ctx context.Context, c *framework.Cluster) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		app := &appv1beta1.App{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: appv1beta1.AppSpec{Image: "nginx:1.27"}}
		if _, err := c.Typed.AppV1beta1().Apps(metav1.NamespaceDefault).Create(ctx, app,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			last = fmt.Errorf("creating an App (dry run): %w", err)
			return false, nil
		}
		if _, err := dyn.Resource(appsV1).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{}); err != nil {
			last = fmt.Errorf("listing apps v1: %w", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the webhooks never served: %w (last error: %v)", err, last)
	}
	return nil
}
