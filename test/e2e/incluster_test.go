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
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// The scenarios here need the manifests' Deployment on real kubelets (make
// e2e-kind): probes, pod deletion, eviction and Services only mean something
// there.

// managerSelector selects the manifests' manager pods.
var managerSelector = labels.SelectorFromSet(labels.Set{
	"app.kubernetes.io/name":      "ndsl-controller-manager",
	"app.kubernetes.io/component": "controller-manager",
}).String()

// managerLeaseDuration is the manifests' (the flag's default) lease duration.
const managerLeaseDuration = 15 * time.Second

// requireInClusterOnRealNodes skips scenarios that need the in-cluster
// Deployment on real kubelets.
func requireInClusterOnRealNodes(t *testing.T) {
	t.Helper()
	if !suite.InClusterManager() || cluster.FakeNodes {
		t.Skipf("needs the in-cluster manager on real nodes (make e2e-kind); %s=%s, fake nodes %v",
			framework.EnvManager, suite.Manager, cluster.FakeNodes)
	}
}

// liveManagerPods lists the manager's pods that are not being deleted.
func liveManagerPods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := cluster.Kube.CoreV1().Pods(framework.ManagerNamespace).List(ctx, metav1.ListOptions{LabelSelector: managerSelector})
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live, nil
}

// waitManagerReady waits until the Deployment's two replicas are Running
// and Ready, as their kubelets' probes judge, and returns the pods.
func waitManagerReady(t *testing.T, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, timeout, "both manager replicas Running and Ready", func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = liveManagerPods(ctx); err != nil {
			return false, err
		}
		var ready int
		var states []string
		for i := range pods {
			if pods[i].Status.Phase == corev1.PodRunning && podReady(&pods[i]) {
				ready++
			}
			states = append(states, fmt.Sprintf("%s %s ready=%v on %q", pods[i].Name, pods[i].Status.Phase, podReady(&pods[i]), pods[i].Spec.NodeName))
		}
		if len(pods) != 2 || ready != 2 {
			return false, fmt.Errorf("%d pods, %d Running and Ready: %v", len(pods), ready, states)
		}
		return true, nil
	})
	return pods
}

// leaderPod names the pod holding the Lease: the identity is
// "<hostname>_<uuid>", and a pod's hostname is its name.
func leaderPod(ctx context.Context) (string, error) {
	holder, err := cluster.LeaseHolder(ctx)
	if err != nil || holder == "" {
		return "", err
	}
	name, _, _ := strings.Cut(holder, "_")
	return name, nil
}

// eventAfterStart says whether the event was last seen after the pod's first
// container started (or the pod has no started container to compare with).
func eventAfterStart(p *corev1.Pod, e *corev1.Event) bool {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return true
	}
	started := p.Status.ContainerStatuses[0].State.Running.StartedAt
	last := e.LastTimestamp
	if last.IsZero() {
		last = metav1.NewTime(e.EventTime.Time)
	}
	return last.After(started.Time)
}

// podReadySince is when the pod's Ready condition last became true.
func podReadySince(p *corev1.Pod) metav1.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime
		}
	}
	return metav1.Time{}
}

// klogError matches a klog error line (text format: "E1123 07:00:00.000000 ...").
var klogError = regexp.MustCompile(`(?m)^E\d{4} .*$`)

// TestInClusterManagerOnRealNodes checks the manifests' Deployment as the
// kubelets run it: both replicas Running and Ready by their probes over
// HTTPS, spread over two nodes, never restarted, read-only root filesystem
// and nonroot; exactly one holds the Lease; no Warning event but a
// startup probe's (readiness probes failing on every start were noise); and
// neither has logged an error since it became Ready.
func TestInClusterManagerOnRealNodes(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	pods := waitManagerReady(t, 3*time.Minute)

	var nodes, names []string
	for _, p := range pods {
		names = append(names, p.Name)
		nodes = append(nodes, p.Spec.NodeName)
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount != 0 {
				t.Errorf("pod %s: container %s restarted %d times", p.Name, s.Name, s.RestartCount)
			}
		}
		c := p.Spec.Containers[0]
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("pod %s: readiness probe %+v, want HTTPS GET", p.Name, c.ReadinessProbe)
		}
		if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
			t.Errorf("pod %s: root filesystem not read-only: %+v", p.Name, sc)
		}
		if sc := p.Spec.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) {
			t.Errorf("pod %s: not runAsNonRoot: %+v", p.Name, sc)
		}
	}
	if nodes[0] == nodes[1] {
		t.Errorf("both replicas on node %s: pod anti-affinity did not spread them", nodes[0])
	}
	t.Logf("manager pods %v on nodes %v", names, nodes)

	leader, err := leaderPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, leader) {
		t.Errorf("the Lease is held by %q, not by one of the manager pods %v", leader, names)
	}

	for _, p := range pods {
		events, err := cluster.Kube.CoreV1().Events(framework.ManagerNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": p.Name, "type": corev1.EventTypeWarning}.String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			// A slow start may fail the startup probe: that is what it is for.
			if strings.HasPrefix(e.Message, "Startup probe failed") {
				t.Logf("pod %s: %s (x%d): %s", p.Name, e.Reason, max(e.Count, 1), e.Message)
				continue
			}
			// A loaded kubelet may retry a volume mount before the
			// container starts ("failed to sync configmap cache"): the
			// node's transient, retried by the kubelet, not the manager's.
			if e.Reason == "FailedMount" && !eventAfterStart(&p, &e) {
				t.Logf("pod %s: %s before the container started (x%d): %s", p.Name, e.Reason, max(e.Count, 1), e.Message)
				continue
			}
			t.Errorf("pod %s: Warning event %s (x%d): %s", p.Name, e.Reason, max(e.Count, 1), e.Message)
		}
		// Steady state: since the pod became Ready. Errors before that are
		// shown, not failed: two replicas starting together race to create
		// the Lease, and client-go logs the loser's AlreadyExists as an error.
		ready := podReadySince(&p)
		all, err := cluster.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range klogError.FindAllString(string(all), 20) {
			t.Logf("pod %s logged (any time): %s", p.Name, line)
		}
		steady, err := cluster.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &ready}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range klogError.FindAllString(string(steady), 20) {
			t.Errorf("pod %s logged an error after it became Ready at %s: %s", p.Name, ready.UTC().Format(time.RFC3339), line)
		}
	}
}

// TestInClusterLeaderPodDeletionFailsOver deletes the leader's pod: on the
// kubelet's SIGTERM it releases the Lease, and the other replica must lead
// within the lease duration; the Deployment then replaces the pod.
func TestInClusterLeaderPodDeletionFailsOver(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	pods := waitManagerReady(t, 3*time.Minute)
	leader, err := leaderPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var standby string
	for _, p := range pods {
		if p.Name != leader {
			standby = p.Name
		}
	}
	if standby == "" || len(pods) != 2 {
		t.Fatalf("leader %q among pods %d: want one leader and one standby", leader, len(pods))
	}

	deleted := time.Now()
	if err := cluster.Kube.CoreV1().Pods(framework.ManagerNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	limit := managerLeaseDuration
	var takeover time.Duration
	// Wait past the limit, so that a slow takeover is measured, not just failed.
	eventually(t, limit+30*time.Second, "the standby "+standby+" to hold the Lease", func(ctx context.Context) (bool, error) {
		holder, err := leaderPod(ctx)
		takeover = time.Since(deleted)
		return holder == standby, err
	})
	t.Logf("leader pod %s deleted: %s leads %v later (limit: the lease duration, %v)", leader, standby, takeover.Round(10*time.Millisecond), limit)
	if takeover > limit {
		t.Errorf("takeover took %v, want at most the lease duration %v", takeover.Round(10*time.Millisecond), limit)
	}
	pods = waitManagerReady(t, 3*time.Minute)
	if holder, err := leaderPod(ctx); err != nil || holder != standby {
		t.Errorf("after the replacement started, the Lease is held by %q (%v), want still %s", holder, err, standby)
	}
	t.Logf("replicas again: %s, %s", pods[0].Name, pods[1].Name)
}

// TestInClusterDrainHeldByPDB drains every schedulable node: the first
// manager pod's eviction is allowed, its replacement cannot be scheduled
// (all nodes cordoned), and the PodDisruptionBudget must then refuse the
// second, so one replica keeps running and leading. Uncordoned, both come
// back.
func TestInClusterDrainHeldByPDB(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	waitManagerReady(t, 3*time.Minute)
	nodes := cluster.Nodes
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := cluster.Kubectl(ctx, append([]string{"uncordon"}, nodes...)...); err != nil {
			t.Errorf("uncordoning: %v", err)
		}
		waitManagerReady(t, 3*time.Minute)
	})

	drainCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := cluster.Kubectl(drainCtx, append([]string{"drain", "--ignore-daemonsets", "--delete-emptydir-data",
		"--timeout=45s"}, nodes...)...)
	if err == nil {
		t.Fatalf("draining %v succeeded, want it held by the PodDisruptionBudget:\n%s", nodes, out)
	}
	if !strings.Contains(out, "disruption budget") {
		t.Errorf("draining %v failed, but not because of the disruption budget: %v", nodes, err)
	}
	live, err := liveManagerPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	for i := range live {
		if live[i].Status.Phase == corev1.PodRunning && podReady(&live[i]) {
			running = append(running, live[i].Name)
		}
	}
	if len(running) != 1 {
		t.Errorf("after the held drain, Running and Ready manager pods %v, want exactly one", running)
	}
	eventually(t, managerLeaseDuration+30*time.Second, "the remaining replica to hold the Lease", func(ctx context.Context) (bool, error) {
		holder, err := leaderPod(ctx)
		return len(running) == 1 && holder == running[0], err
	})
	t.Logf("drain of %v held by the PodDisruptionBudget; %v still runs and leads", nodes, running)
}

// TestInClusterAppReadyOnlyWithReadyPods: an App whose image cannot be
// pulled has pods that really fail, and must not be Ready; given an image
// that runs, it becomes Ready with its pods Running and Ready on the nodes.
func TestInClusterAppReadyOnlyWithReadyPods(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	app := newApp("unpullable", 2, true)
	app.Spec.Image = "ndsl-e2e/does-not-exist:v1"
	createApp(t, ns, app)

	selector := labels.SelectorFromSet(labels.Set{appcontroller.AppLabel: app.Name}).String()
	eventually(t, convergeTimeout, "a pod of App "+app.Name+" failing to pull its image", func(ctx context.Context) (bool, error) {
		pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("%d pods, none waiting on an image pull error", len(pods.Items))
	})
	// The App says why, as kubectl describe would: the real kubelet's
	// ErrImagePull and ImagePullBackOff, reported alike.
	want := fmt.Sprintf("ImagePullBackOff for image %q", app.Spec.Image)
	var got *appv1beta1.App
	eventually(t, convergeTimeout, "App "+app.Name+"'s Ready condition to name the image pull error", func(ctx context.Context) (bool, error) {
		var err error
		if got, err = cluster.Typed.AppV1beta1().Apps(ns).Get(ctx, app.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, appv1beta1.ConditionReady)
		return c != nil && strings.Contains(c.Message, want), fmt.Errorf("status: %s", describeApp(got))
	})
	if appReady(got) || got.Status.ReadyReplicas != 0 {
		t.Errorf("App with unpullable image: %s, readyReplicas %d; want not Ready, 0", describeApp(got), got.Status.ReadyReplicas)
	}

	// The controller keeps writing the App's status, so the fix is retried
	// on a conflict with a fresh read, as kubectl edit would.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := cluster.Typed.AppV1beta1().Apps(ns).Get(ctx, app.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest.Spec.Image = workloadImage()
		_, err = cluster.Typed.AppV1beta1().Apps(ns).Update(ctx, latest, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ready := waitAppReady(t, ns, app.Name, convergeTimeout)
	if ready.Status.ReadyReplicas != 2 {
		t.Errorf("status.readyReplicas = %d, want 2", ready.Status.ReadyReplicas)
	}
	deployments, err := cluster.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(deployments.Items) != 1 {
		t.Fatalf("Deployments of App %s: %d (%v), want 1", app.Name, len(deployments.Items), err)
	}
	checkPodsReady(t, ns, deployments.Items[0].Spec.Selector, 2, cluster.Nodes)
}

// TestInClusterMetricsThroughService scrapes /metrics through the metrics
// Service from pods, with their ServiceAccounts' tokens: 200 for one bound
// to the shipped metrics-reader role, 403 for one without it, 401 without
// a token; and /debug/controllers, 200 with the shipped debug reader role.
// Every request verifies the server's certificate against the CA bundle the
// manager publishes, as a scraper needs no insecureSkipVerify.
func TestInClusterMetricsThroughService(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bindings := map[string]string{"scraper": metricsReaderRole, "debugger": debugReaderRole}
	for _, sa := range []string{"scraper", "stranger", "debugger"} {
		if _, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for sa, role := range bindings {
		bindClusterRole(t, ns, sa, role)
	}
	// Every client verifies the manager's certificate as the Prometheus
	// overlay does: against the CA bundle the manager publishes, for the
	// metrics Service's name. A pod mounts ConfigMaps of its own namespace
	// only, so the bundle is copied here.
	published, err := cluster.Kube.CoreV1().ConfigMaps(framework.ManagerNamespace).Get(ctx, managerCAConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the manager's published CA bundle: %v", err)
	}
	// And a bundle that must not verify it (the cluster's own CA), so that
	// the verification is shown to happen.
	var clusterCA *corev1.ConfigMap
	eventually(t, time.Minute, "the namespace's kube-root-ca.crt", func(ctx context.Context) (bool, error) {
		clusterCA, err = cluster.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, err
	})
	const otherCA = "other-ca"
	for name, bundle := range map[string]string{managerCAConfigMap: published.Data[certs.CABundleKey], otherCA: clusterCA.Data["ca.crt"]} {
		if _, err := cluster.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{certs.CABundleKey: bundle},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	base := fmt.Sprintf("https://controller-manager-metrics.%s.svc:8443", framework.ManagerNamespace)
	cases := []struct {
		pod, sa, path string
		token         bool
		ca            string
		want          string // the client's output, or its start for an error
	}{
		{"scraper", "scraper", "/metrics", true, managerCAConfigMap, "status 200"},
		{"stranger", "stranger", "/metrics", true, managerCAConfigMap, "status 403"},
		{"anonymous", "stranger", "/metrics", false, managerCAConfigMap, "status 401"},
		{"debugger", "debugger", "/debug/controllers", true, managerCAConfigMap, "status 200"},
		{"debugger-metrics", "debugger", "/metrics", true, managerCAConfigMap, "status 403"},
		{"other-ca", "scraper", "/metrics", true, otherCA, "error: " + `Get "` + base + `/metrics": tls: failed to verify certificate: x509: certificate signed by unknown authority`},
	}
	for _, tc := range cases {
		args := []string{"get", base + tc.path}
		if tc.token {
			args = append(args, "/var/run/secrets/kubernetes.io/serviceaccount/token")
		}
		startClientPod(t, ns, tc.pod, tc.sa, tc.ca, args...)
	}
	for _, tc := range cases {
		if out := clientPodOutput(t, ns, tc.pod); !strings.HasPrefix(out, tc.want) {
			t.Errorf("GET %s as %s (token: %v, CA bundle %s): %q, want %q", tc.path, tc.sa, tc.token, tc.ca, out, tc.want)
		}
	}
}

// debugReaderRole is the shipped ClusterRole for /debug/controllers.
const debugReaderRole = "ndsl-controller-manager:debug-reader"

// bindClusterRole binds the ClusterRole to ServiceAccount ns/sa until the
// test ends.
func bindClusterRole(t *testing.T, ns, sa, role string) {
	t.Helper()
	_, err := cluster.Kubectl(context.Background(), "create", "clusterrolebinding", ns+"-"+sa, "--clusterrole="+role,
		"--serviceaccount="+ns+":"+sa)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cluster.Kubectl(context.Background(), "delete", "clusterrolebinding", ns+"-"+sa, "--ignore-not-found")
	})
}

// managerCAConfigMap is where the manager publishes its CA bundle (the
// --webhook-ca-configmap default), under certs.CABundleKey.
const managerCAConfigMap = "controller-manager-ca"

// startClientPod runs the workload image with args once, as ServiceAccount
// sa. With caConfigMap, a ConfigMap of ns holding the manager's CA bundle,
// its HTTPS requests verify the server against that bundle.
func startClientPod(t *testing.T, ns, name, sa, caConfigMap string, args ...string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: workloadImage(), Args: args,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
	if caConfigMap != "" {
		const dir = "/etc/manager-ca"
		pod.Spec.Volumes = []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: caConfigMap}}}}}
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = []corev1.VolumeMount{{Name: "ca", MountPath: dir, ReadOnly: true}}
		c.Env = []corev1.EnvVar{{Name: "CA_FILE", Value: dir + "/" + certs.CABundleKey}}
	}
	if _, err := cluster.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// clientPodOutput waits for the client pod to succeed and returns its
// output, trimmed.
func clientPodOutput(t *testing.T, ns, name string) string {
	t.Helper()
	eventually(t, convergeTimeout, "client pod "+name+" to succeed", func(ctx context.Context) (bool, error) {
		p, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s failed", name)
		}
		return p.Status.Phase == corev1.PodSucceeded, fmt.Errorf("pod %s: %s", name, p.Status.Phase)
	})
	out, err := cluster.Kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestInClusterWebhooksThroughTheService: the API server calls the
// manager's admission and conversion webhooks through the webhook Service,
// and both replicas serve the certificate kept in the shared Secret.
func TestInClusterWebhooksThroughTheService(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)

	vwc, err := cluster.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, framework.WebhookConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if w.ClientConfig.Service == nil {
			t.Errorf("webhook %s calls %v, not the Service", w.Name, w.ClientConfig.URL)
		}
	}

	// Admission: a name the API server accepts but the App webhook refuses
	// (an App's name also names its Service, a DNS-1035 label).
	_, err = cluster.Typed.AppV1beta1().Apps(ns).Create(ctx, newApp("9lives", 1, true), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "must be a DNS-1035 label") {
		t.Errorf("creating App 9lives: %v, want the webhook's DNS-1035 rejection", err)
	}

	// Conversion: an App stored as v1beta1, read as v1 twenty times; the
	// Service spreads the calls over both replicas.
	app := createApp(t, ns, newApp("converted", 1, true))
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	v1 := schema.GroupVersionResource{Group: appv1beta1.SchemeGroupVersion.Group, Version: "v1", Resource: "apps"}
	for range 20 {
		u, err := dyn.Resource(v1).Namespace(ns).Get(ctx, app.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading App %s as v1: %v", app.Name, err)
		}
		if image, _, _ := unstructured.NestedString(u.Object, "spec", "image"); u.GetAPIVersion() != v1.GroupVersion().String() || image != app.Spec.Image {
			t.Fatalf("App %s read as v1: apiVersion %s, spec.image %q", app.Name, u.GetAPIVersion(), image)
		}
	}

	// Both replicas serve the certificate the Secret holds.
	secret, err := cluster.Kube.CoreV1().Secrets(framework.ManagerNamespace).Get(ctx, "controller-manager-webhook-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil {
		t.Fatalf("Secret controller-manager-webhook-certs has no PEM certificate in %s", corev1.TLSCertKey)
	}
	want := fmt.Sprintf("sha256 %x", sha256.Sum256(block.Bytes))
	pods, err := cluster.Kube.CoreV1().Pods(framework.ManagerNamespace).List(ctx, metav1.ListOptions{LabelSelector: managerSelector})
	if err != nil {
		t.Fatal(err)
	}
	var serving []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			serving = append(serving, p)
		}
	}
	if len(serving) != 2 {
		t.Fatalf("%d running manager pods, want 2", len(serving))
	}
	if _, err := cluster.Kube.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "certs"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, p := range serving {
		startClientPod(t, ns, fmt.Sprintf("cert-%d", i), "certs", "", "cert", net.JoinHostPort(p.Status.PodIP, "9443"))
	}
	for i, p := range serving {
		if got := clientPodOutput(t, ns, fmt.Sprintf("cert-%d", i)); got != want {
			t.Errorf("pod %s serves the webhook certificate %q, the Secret holds %q", p.Name, got, want)
		}
	}
}
