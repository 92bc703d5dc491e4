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

package coexistence

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// routesOnlyTo checks that the Service's endpoints are exactly the Running
// pods of Deployment mine; it fails as misrouted when they include a pod
// of Deployment other.
func routesOnlyTo(ctx context.Context, ns, service string, mine, other types.UID) error {
	own, err := podIPsOf(ctx, ns, mine)
	if err != nil {
		return err
	}
	foreign, err := podIPsOf(ctx, ns, other)
	if err != nil {
		return err
	}
	routed, err := endpointIPs(ctx, ns, service)
	if err != nil {
		return err
	}
	for _, ip := range routed {
		if slices.Contains(foreign, ip) {
			return misrouted{fmt.Errorf("Service %s routes to %s, a pod of another owner (endpoints %v, own pods %v, other pods %v)",
				service, ip, routed, own, foreign)}
		}
	}
	if len(own) == 0 || !sameSet(routed, own) {
		return errorf("Service %s: endpoints %v, own pods %v, other pods %v", service, routed, own, foreign)
	}
	return nil
}

// misrouted is a routing failure, which is final, unlike "not yet".
type misrouted struct{ error }

// podIPsOf lists the IPs of the Running pods whose ReplicaSet the
// Deployment deployment controls.
func podIPsOf(ctx context.Context, ns string, deployment types.UID) ([]string, error) {
	sets, err := cp.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var mine []types.UID
	for i := range sets.Items {
		if controlledBy(&sets.Items[i], deployment) {
			mine = append(mine, sets.Items[i].UID)
		}
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var ips []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		ref := metav1.GetControllerOf(pod)
		if ref != nil && slices.Contains(mine, ref.UID) && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
			ips = append(ips, pod.Status.PodIP)
		}
	}
	return ips, nil
}

// endpointIPs lists the addresses of the Service's EndpointSlices.
func endpointIPs(ctx context.Context, ns, service string) ([]string, error) {
	slices, err := cp.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			ips = append(ips, e.Addresses...)
		}
	}
	return ips, nil
}

// sameSet holds when a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
