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

package controlplane_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// TestControlPlane proves the harness: controllers, scheduler and fake
// kubelets make a Deployment available, an API server restart is survived,
// and RBAC applies to ServiceAccount credentials.
func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	begin := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok ready in %v", time.Since(begin))

	begin = time.Now()
	if err := cp.CreateFakeNodes(ctx, "kwok-node-1", "kwok-node-2"); err != nil {
		t.Fatal(err)
	}
	t.Logf("2 fake nodes Ready in %v", time.Since(begin))

	deployments := cp.Client.AppsV1().Deployments(metav1.NamespaceDefault)
	if _, err := deployments.Create(ctx, testDeployment("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	waitAvailable(ctx, t, cp.Client, "web", 2)
	t.Logf("Deployment with 2 replicas available in %v", time.Since(begin))

	pods, err := cp.Client.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if !strings.HasPrefix(pod.Spec.NodeName, "kwok-node-") || pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q, phase %s; want a kwok node, Running", pod.Name, pod.Spec.NodeName, pod.Status.Phase)
		}
	}

	t.Run("RestartAPIServer", func(t *testing.T) {
		begin := time.Now()
		if err := cp.RestartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("kube-apiserver restarted in %v", time.Since(begin))
		// The whole chain reconnected: scaling up still ends in available Pods.
		scale, err := deployments.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = 3
		if _, err := deployments.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAvailable(ctx, t, cp.Client, "web", 3)
	})

	t.Run("ServiceAccountKubeconfig", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		cfg, err := cp.ServiceAccountKubeconfig(ctx, metav1.NamespaceDefault, "unprivileged", path)
		if err != nil {
			t.Fatal(err)
		}
		fromFile, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		for name, cfg := range map[string]*rest.Config{"returned config": cfg, "written kubeconfig": fromFile} {
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.CoreV1().Secrets(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: listing secrets: got %v, want Forbidden", name, err)
			}
		}
	})
}

// TestMinimalControlPlane starts etcd and kube-apiserver only, with their
// output in one writer, and checks that Stop is idempotent.
func TestMinimalControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var logs bytes.Buffer
	begin := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{Logs: &logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd + kube-apiserver ready in %v", time.Since(begin))
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if err := cp.CreateFakeNodes(ctx, "n"); err == nil {
		t.Error("CreateFakeNodes without kwok: got no error")
	}
	begin = time.Now()
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(begin))
	if err := cp.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := os.Stat(cp.Dir); !os.IsNotExist(err) {
		t.Errorf("state directory %s still there after Stop (%v)", cp.Dir, err)
	}
	for _, prefix := range []string{"[etcd] ", "[kube-apiserver] "} {
		if !strings.Contains(logs.String(), prefix) {
			t.Errorf("Options.Logs got no line starting %q", prefix)
		}
	}
}

// TestMissingBinaries checks that the error says how to get the binaries.
func TestMissingBinaries(t *testing.T) {
	_, err := controlplane.Start(context.Background(), controlplane.Options{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "hack/build-controlplane.sh") {
		t.Fatalf("got %v, want an error that names hack/build-controlplane.sh", err)
	}
}

// waitAvailable waits until the Deployment reports want available replicas.
func waitAvailable(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, want int32) {
	t.Helper()
	var got *appsv1.Deployment
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // the API server may be coming back from a restart
		}
		got = d
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == want, nil
	})
	if err != nil {
		t.Fatalf("waiting for Deployment %s to have %d available replicas: %v; last status: %+v", name, want, err, got.Status)
	}
}

func testDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "fake-image"}},
				},
			},
		},
	}
}

// TestComponentExitsEarly checks that Start fails fast, with the component's
// last output, when a component dies during startup.
func TestComponentExitsEarly(t *testing.T) {
	binDir := t.TempDir()
	failing := "#!/bin/sh\necho \"listening went wrong: $*\" >&2\nexit 3\n"
	for _, path := range []string{
		filepath.Join(binDir, "etcd-"+controlplane.EtcdVersion, "etcd"),
		filepath.Join(binDir, "kube-"+controlplane.KubeVersion, "kube-apiserver"),
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(failing), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir})
	if err == nil || !strings.Contains(err.Error(), "etcd exited") || !strings.Contains(err.Error(), "listening went wrong: --name=controlplane") {
		t.Fatalf("got %v, want etcd's early exit with its output", err)
	}
	t.Log(err)
}
