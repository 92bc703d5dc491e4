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
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// The manager's own disruptions, as an operator causes them, under a user's
// load on the webhooks: no request may fail. They leave the Deployment as
// they found it: two Ready replicas on two nodes, one leading.

// disruptionTimeout bounds a rollout or a drain of the manager on a loaded
// machine: each replica's lame duck alone takes --shutdown-delay-duration.
const disruptionTimeout = 5 * time.Minute

// TestInClusterRolloutRestartFailsNoRequest restarts the manager's
// Deployment as `kubectl rollout restart` does while a user creates Apps and
// lists them as v1: until the rollout has ended (new pods Ready, old pods
// gone), not one request may fail.
func TestInClusterRolloutRestartFailsNoRequest(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	before := spreadManager(t)
	t.Cleanup(func() { spreadManager(t) })
	keepLogs(t, before)
	ns := newNamespace(t)
	load := startRequestLoad(t, ns)
	load.waitStarted(t)

	if _, err := cluster.Kubectl(ctx, "rollout", "restart", "-n", framework.ManagerNamespace, "deployment/"+framework.ManagerDeploymentName); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	statusCtx, cancel := context.WithTimeout(ctx, disruptionTimeout)
	defer cancel()
	if _, err := cluster.Kubectl(statusCtx, "rollout", "status", "-n", framework.ManagerNamespace,
		"deployment/"+framework.ManagerDeploymentName, fmt.Sprintf("--timeout=%s", disruptionTimeout)); err != nil {
		t.Fatal(err)
	}
	after := waitReplaced(t, before, disruptionTimeout)
	t.Logf("rollout restart: pods %v replaced by %v on %v in %v", podNames(before), podNames(after), podNodes(after),
		time.Since(restarted).Round(100*time.Millisecond))
	load.check(t, "kubectl rollout restart")
	waitLeaderAmong(t, after)
}

// TestInClusterDrainLeaderNodeFailsNoRequest drains the node of the leading
// replica with kubectl drain (evictions, which the PodDisruptionBudget
// allows one at a time) while a user creates Apps and lists them as v1:
// until the evicted replica is gone and its replacement Ready elsewhere, not
// one request may fail. The node is uncordoned and the replicas spread again
// afterwards.
func TestInClusterDrainLeaderNodeFailsNoRequest(t *testing.T) {
	requireInClusterOnRealNodes(t)
	ctx := context.Background()
	before := spreadManager(t)
	leader, err := leaderPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(before, func(p corev1.Pod) bool { return p.Name == leader })
	if i < 0 {
		t.Fatalf("the Lease is held by %q, not by one of the manager pods %v", leader, podNames(before))
	}
	node := before[i].Spec.NodeName
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := cluster.Kubectl(ctx, "uncordon", node); err != nil {
			t.Errorf("uncordoning %s: %v", node, err)
		}
		spreadManager(t)
	})
	keepLogs(t, before)
	ns := newNamespace(t)
	load := startRequestLoad(t, ns)
	load.waitStarted(t)

	drained := time.Now()
	drainCtx, cancel := context.WithTimeout(ctx, disruptionTimeout)
	defer cancel()
	// --force: a bare pod another test left behind must not stop the drain.
	if out, err := cluster.Kubectl(drainCtx, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force",
		fmt.Sprintf("--timeout=%s", disruptionTimeout)); err != nil {
		t.Fatalf("draining %s: %v\n%s", node, err, out)
	}
	after := waitReplaced(t, before[i:i+1], disruptionTimeout)
	t.Logf("drain of %s, the leader %s's node: pods now %v on %v, %v after the drain began", node, leader, podNames(after),
		podNodes(after), time.Since(drained).Round(100*time.Millisecond))
	load.check(t, "kubectl drain of the leader's node")
	waitLeaderAmong(t, after)
}

// waitReplaced waits until no pod of gone is left, not even terminating, and
// the Deployment's two replicas are Running and Ready; it returns them.
func waitReplaced(t *testing.T, gone []corev1.Pod, timeout time.Duration) []corev1.Pod {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("the manager pods %v to be gone", podNames(gone)), func(ctx context.Context) (bool, error) {
		list, err := cluster.Kube.CoreV1().Pods(framework.ManagerNamespace).List(ctx, metav1.ListOptions{LabelSelector: managerSelector})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if slices.ContainsFunc(gone, func(g corev1.Pod) bool { return g.UID == p.UID }) {
				return false, fmt.Errorf("pod %s still exists (deleted: %v)", p.Name, p.DeletionTimestamp != nil)
			}
		}
		return true, nil
	})
	return waitManagerReady(t, timeout)
}

// waitLeaderAmong waits until one of pods holds the Lease.
func waitLeaderAmong(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	eventually(t, managerLeaseDuration+30*time.Second, fmt.Sprintf("one of %v to hold the Lease", podNames(pods)), func(ctx context.Context) (bool, error) {
		holder, err := leaderPod(ctx)
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == holder }), err
	})
}

// spreadManager waits for the two replicas and, if they share a node (as
// after a drain), deletes the standby so that the scheduler's anti-affinity
// places its replacement on another node. It returns the replicas.
func spreadManager(t *testing.T) []corev1.Pod {
	t.Helper()
	pods := waitManagerReady(t, 3*time.Minute)
	// The anti-affinity is preferred, not required: a replacement may land
	// on the same node again while the other node is busy, so try thrice.
	const tries = 3
	for try := 1; pods[0].Spec.NodeName == pods[1].Spec.NodeName; try++ {
		if try > tries {
			t.Fatalf("the replicas %v still share node %s after %d replacements", podNames(pods), pods[0].Spec.NodeName, tries)
		}
		leader, err := leaderPod(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		standby := pods[0]
		if standby.Name == leader {
			standby = pods[1]
		}
		t.Logf("both replicas on %s: deleting the standby %s to spread them (try %d of %d)", standby.Spec.NodeName, standby.Name, try, tries)
		if err := cluster.Kube.CoreV1().Pods(framework.ManagerNamespace).Delete(context.Background(), standby.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &standby.UID}}); err != nil {
			t.Fatal(err)
		}
		pods = waitReplaced(t, []corev1.Pod{standby}, 3*time.Minute)
	}
	return pods
}

func podNames(pods []corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

func podNodes(pods []corev1.Pod) []string {
	nodes := make([]string, len(pods))
	for i, p := range pods {
		nodes[i] = p.Spec.NodeName
	}
	return nodes
}

// keepLogs follows the logs of pods, with timestamps, into the artifacts
// directory until each container exits or the test ends: the pods a
// disruption stops are gone, logs and all, before the suite collects logs.
func keepLogs(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	dir := suite.ArtifactsDir
	if dir == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, p := range pods {
		wg.Go(func() {
			stream, err := cluster.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Follow: true, Timestamps: true}).Stream(ctx)
			if err != nil {
				t.Logf("following the logs of pod %s: %v", p.Name, err)
				return
			}
			defer stream.Close()
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s.log", t.Name(), p.Name)))
			if err != nil {
				t.Logf("keeping the logs of pod %s: %v", p.Name, err)
				return
			}
			defer f.Close()
			_, _ = io.Copy(f, stream)
		})
	}
}
