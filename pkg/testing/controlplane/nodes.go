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

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// FakeNodeAnnotation, set to "fake", marks the Nodes kwok manages.
const FakeNodeAnnotation = "kwok.x-k8s.io/node"

// fakeNodeReadyTimeout bounds CreateFakeNodes' wait.
const fakeNodeReadyTimeout = 2 * time.Minute

// FakeNodePods is how many pods the fake Nodes of ControlPlane.CreateFakeNodes hold.
const FakeNodePods = 110

// CreateFakeNodes creates kwok-managed Nodes with the given names (existing
// ones are kept) and waits until all of them are Ready. It needs Options.Kwok.
func (cp *ControlPlane) CreateFakeNodes(ctx context.Context, names ...string) error {
	if !cp.opts.Kwok {
		return errors.New("creating fake nodes: the control plane runs without kwok (Options.Kwok)")
	}
	return CreateFakeNodes(ctx, cp.Client, FakeNodePods, names...)
}

// CreateFakeNodes creates, in any cluster where kwok runs with this
// package's flags, Nodes for kwok to manage, each with room for pods pods
// (existing ones are kept), and waits until all of them are Ready.
func CreateFakeNodes(ctx context.Context, client kubernetes.Interface, pods int, names ...string) error {
	for _, name := range names {
		_, err := client.CoreV1().Nodes().Create(ctx, fakeNode(name, pods), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating fake node %s: %w", name, err)
		}
	}
	var notReady []string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, fakeNodeReadyTimeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // transient: the deadline bounds the retries
		}
		ready := map[string]bool{}
		for i := range nodes.Items {
			ready[nodes.Items[i].Name] = NodeReady(&nodes.Items[i])
		}
		notReady = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return ready[n] })
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for fake nodes %v to become Ready (is kwok running in the cluster?): %w", notReady, err)
	}
	return nil
}

// fakeNode is a Node that kwok manages: it gets Ready conditions, a lease and
// runs (pretends to run) the Pods bound to it. Only the pod count limits
// what it takes.
func fakeNode(name string, pods int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				FakeNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    "amd64",
				OperatingSystem: "linux",
				KubeletVersion:  "fake",
			},
		},
	}
}

// NodeReady reports whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
