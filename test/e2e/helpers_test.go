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
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/test/e2e/framework"
	integration "github.com/ndsl/controller-manager/test/integration/framework"
)

// Lease settings of the managers. The defaults are the manifests' (the
// SIGTERM handover within 5 s only proves a released Lease when the lease
// duration is much longer than that); the short ones make a kill -9
// failover, bounded by lease duration + 5 s, quick to test.
var (
	defaultLease = leaseSettings{duration: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}
	shortLease   = leaseSettings{duration: 6 * time.Second, renew: 4 * time.Second, retry: time.Second}
	// releaseLease keeps the default 15 s lease duration, so that only a
	// released Lease allows a handover within 5 s, but retries every second:
	// client-go jitters the standby's retries to between 1 and 2.2 periods,
	// and with the default 2 s period that alone can take 4.4 s.
	releaseLease = leaseSettings{duration: 15 * time.Second, renew: 10 * time.Second, retry: time.Second}
)

type leaseSettings struct{ duration, renew, retry time.Duration }

func (l leaseSettings) args() []string {
	return []string{
		"--leader-elect-lease-duration=" + l.duration.String(),
		"--leader-elect-renew-deadline=" + l.renew.String(),
		"--leader-elect-retry-period=" + l.retry.String(),
	}
}

// convergeTimeout bounds a wait for objects to converge: a few seconds
// normally, more right after a failover or an API server restart.
const convergeTimeout = 2 * time.Minute

// leaderTimeout bounds the wait for a first leader: a Lease left by a
// process killed in an earlier (failed) test expires after 15 s.
const leaderTimeout = 45 * time.Second

// requireProcesses skips tests that signal manager processes when the
// manager under test is the in-cluster Deployment.
func requireProcesses(t *testing.T) {
	t.Helper()
	if launcher == nil {
		t.Skipf("needs manager processes; %s=%s runs only the convergence scenarios", framework.EnvManager, suite.Manager)
	}
}

// startManagers starts n manager processes with args, stopped (SIGTERM,
// then SIGKILL) when the test ends; a failed test gets the end of each log.
func startManagers(t *testing.T, n int, args ...string) []*framework.Process {
	t.Helper()
	ctx := context.Background()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	procs := make([]*framework.Process, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { procs[i], errs[i] = launcher.Start(ctx, fmt.Sprintf("%s-%d", name, i+1), args...) })
	}
	wg.Wait()
	var started []*framework.Process
	for _, p := range procs {
		if p != nil {
			started = append(started, p)
		}
	}
	trackProcess(t, started...)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return procs
}

// trackProcess stops procs together when the test ends (so that a standby
// does not take over from a leader stopped before it) and shows the end of
// each one's log if the test failed.
func trackProcess(t *testing.T, procs ...*framework.Process) {
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(func() { p.Stop(40 * time.Second) })
		}
		wg.Wait()
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			t.Logf("--- last lines of %s (pid %d, %s; full log %s):\n%s", p.Name, p.Pid(), p.ExitDescription(), p.LogPath, p.LogTail(40))
		}
	})
}

// waitForLeader waits until exactly one of procs leads and returns it and
// the others.
func waitForLeader(t *testing.T, procs ...*framework.Process) (*framework.Process, []*framework.Process) {
	t.Helper()
	leader, _, err := framework.WaitForLeader(context.Background(), leaderTimeout, procs...)
	if err != nil {
		t.Fatal(err)
	}
	var others []*framework.Process
	for _, p := range procs {
		if p != leader {
			others = append(others, p)
		}
	}
	return leader, others
}

// newNamespace creates a namespace for the test, deleted when it ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := integration.CreateNamespace(t, cluster.Kube)
	t.Cleanup(func() {
		_ = cluster.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return ns
}

// eventually polls cond until it holds, failing the test after timeout with
// the last error cond returned before the deadline (the one at the deadline
// is only about the deadline). cond's errors are not fatal while polling.
func eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s (last error: %v)", timeout, what, last)
	}
}

// workloadImage is the image of the suite's Apps and Pipeline steps:
// $E2E_WORKLOAD_IMAGE, an image the cluster's nodes have (make e2e-kind
// loads test/e2e/images/web), else nginx with a tag the kubelet does not
// re-pull (kwok nodes pull nothing).
func workloadImage() string {
	if img := os.Getenv("E2E_WORKLOAD_IMAGE"); img != "" {
		return img
	}
	return "nginx:1.27"
}

// isWebhookCallFailure reports whether err is the API server's error for a
// webhook it could not call (as opposed to a webhook's own rejection): an
// admission webhook's ("failed calling webhook") or the conversion
// webhook's ("conversion webhook for … failed: Post …: write: broken
// pipe", seen when the leader is killed mid-create).
func isWebhookCallFailure(err error) bool {
	if !apierrors.IsInternalError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "conversion webhook for")
}

// newApp is an App with replicas of the workload image and no Ingress. The
// notes' defaulting webhook inverts enable_ingress when an App is created
// (on by default) unless the decision is already recorded in its
// annotation: newApp records it, so the App is stored as written.
func newApp(name string, replicas int32, service bool) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{appv1beta1.EnableIngressRequestedAnnotation: "false"}},
		Spec:       appv1beta1.AppSpec{Image: workloadImage(), Replicas: ptr.To(replicas), EnableService: service},
	}
}

// createApp creates app in ns, retrying transient errors (an API server
// that has just come back) until the deadline.
func createApp(t testing.TB, ns string, app *appv1beta1.App) *appv1beta1.App {
	t.Helper()
	var created *appv1beta1.App
	tried := false
	eventually(t, 30*time.Second, "creating App "+app.Name, func(ctx context.Context) (bool, error) {
		var err error
		created, err = cluster.Typed.AppV1beta1().Apps(ns).Create(ctx, app, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && tried {
			// An earlier attempt was stored though its answer was lost
			// (an API server restarting): the test's namespace is its own.
			created, err = cluster.Typed.AppV1beta1().Apps(ns).Get(ctx, app.Name, metav1.GetOptions{})
		}
		tried = true
		return err == nil, err
	})
	return created
}

// createPipeline creates p through v1beta1, retrying: Pipelines are stored
// at v1, and a v1beta1 write needs the conversion webhook, which the API
// server reaches once a manager has written the CRD's caBundle.
func createPipeline(t testing.TB, p *pipelinev1beta1.Pipeline) *pipelinev1beta1.Pipeline {
	t.Helper()
	var created *pipelinev1beta1.Pipeline
	eventually(t, 30*time.Second, "creating Pipeline "+p.Name, func(ctx context.Context) (bool, error) {
		var err error
		created, err = cluster.Typed.PipelineV1beta1().Pipelines().Create(ctx, p, metav1.CreateOptions{})
		return err == nil, err
	})
	return created
}

// appReady reports whether the App's status is of its current generation
// and says Ready=True.
func appReady(app *appv1beta1.App) bool {
	c := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionReady)
	return app.Status.ObservedGeneration == app.Generation && c != nil && c.Status == metav1.ConditionTrue &&
		c.ObservedGeneration == app.Generation
}

// describeApp is a one-line account of an App's status for failure messages.
func describeApp(app *appv1beta1.App) string {
	var parts []string
	for _, c := range app.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("App %s generation %d observed %d, %d/%d available: %s", app.Name, app.Generation,
		app.Status.ObservedGeneration, app.Status.AvailableReplicas, ptr.Deref(app.Spec.Replicas, 1), strings.Join(parts, " "))
}

// waitAppReady waits until the App reports Ready=True for its current
// generation and returns it.
func waitAppReady(t testing.TB, ns, name string, timeout time.Duration) *appv1beta1.App {
	t.Helper()
	var app *appv1beta1.App
	eventually(t, timeout, "App "+ns+"/"+name+" to be Ready", func(ctx context.Context) (bool, error) {
		var err error
		if app, err = cluster.Typed.AppV1beta1().Apps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		if !appReady(app) {
			return false, fmt.Errorf("%s", describeApp(app))
		}
		return true, nil
	})
	return app
}

// waitAppsReady waits until every App in ns is Ready and there are want of them.
func waitAppsReady(t testing.TB, ns string, want int, timeout time.Duration) []appv1beta1.App {
	t.Helper()
	var apps []appv1beta1.App
	eventually(t, timeout, fmt.Sprintf("%d Apps in %s to be Ready", want, ns), func(ctx context.Context) (bool, error) {
		list, err := cluster.Typed.AppV1beta1().Apps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		apps = list.Items
		var notReady []string
		for i := range apps {
			if !appReady(&apps[i]) {
				notReady = append(notReady, describeApp(&apps[i]))
			}
		}
		if len(apps) != want || len(notReady) > 0 {
			return false, fmt.Errorf("%d Apps, %d not Ready, e.g. %v", len(apps), len(notReady), first(notReady))
		}
		return true, nil
	})
	return apps
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// controlledBy fails unless obj's controller reference is the object uid,
// named at v1 (Apps and Pipelines are stored at v1, and the manager names
// them so; a Service is core v1).
func controlledBy(t testing.TB, obj metav1.Object, kind string, uid types.UID) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != uid || ref.Kind != kind || path.Base(ref.APIVersion) != "v1" {
		t.Errorf("%s/%s: controller reference %+v, want %s %s at v1", obj.GetNamespace(), obj.GetName(), ref, kind, uid)
	}
}

// checkAppChildren checks a Ready App's children: exactly one Deployment,
// controlled by it and rolled out once (one ReplicaSet); its Service exactly
// when asked for; and its pods Running and Ready on the cluster's nodes.
func checkAppChildren(t testing.TB, ns string, app *appv1beta1.App) {
	t.Helper()
	ctx := context.Background()
	selector := labels.SelectorFromSet(labels.Set{appcontroller.AppLabel: app.Name}).String()
	deployments, err := cluster.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 {
		t.Fatalf("App %s: %d Deployments, want exactly 1", app.Name, len(deployments.Items))
	}
	d := deployments.Items[0]
	controlledBy(t, &d, "App", app.UID)
	if got, want := ptr.Deref(d.Spec.Replicas, 1), ptr.Deref(app.Spec.Replicas, 1); got != want {
		t.Errorf("Deployment %s: %d replicas, want %d", d.Name, got, want)
	}
	if rs := replicaSetsOf(t, ns, &d); len(rs) != 1 {
		t.Errorf("Deployment %s has %d ReplicaSets %v, want 1: its template was rewritten", d.Name, len(rs), rs)
	}

	services, err := cluster.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case app.Spec.EnableService && len(services.Items) != 1:
		t.Errorf("App %s: %d Services, want exactly 1", app.Name, len(services.Items))
	case app.Spec.EnableService:
		controlledBy(t, &services.Items[0], "App", app.UID)
	case len(services.Items) != 0:
		t.Errorf("App %s without enable_service has %d Services", app.Name, len(services.Items))
	}

	checkPodsReady(t, ns, d.Spec.Selector, ptr.Deref(app.Spec.Replicas, 1), cluster.Nodes)
}

// replicaSetsOf names the ReplicaSets the Deployment controls.
func replicaSetsOf(t testing.TB, ns string, d *appsv1.Deployment) []string {
	t.Helper()
	list, err := cluster.Kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rs := range list.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
			names = append(names, rs.Name)
		}
	}
	return names
}

// checkPodsReady fails unless exactly want pods match selector, each
// Running, Ready and bound to one of nodes.
func checkPodsReady(t testing.TB, ns string, selector *metav1.LabelSelector, want int32, nodes []string) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if int32(len(live)) != want {
		t.Errorf("%d pods match %s in %s, want %d", len(live), sel, ns, want)
	}
	for _, p := range live {
		if p.Status.Phase != corev1.PodRunning || !podReady(&p) || !slices.Contains(nodes, p.Spec.NodeName) {
			t.Errorf("pod %s/%s: phase %s, ready %v, node %q; want Running, Ready, on one of %v",
				ns, p.Name, p.Status.Phase, podReady(&p), p.Spec.NodeName, nodes)
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
