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

package chart

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// containerPort is the number of the manager container's port named name, or 0.
func containerPort(pod corev1.PodSpec, name string) int32 {
	for _, p := range pod.Containers[0].Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// servicePort resolves a Service's only port's targetPort against the pod.
func servicePort(t *testing.T, objects []object, name string, pod corev1.PodSpec) int32 {
	t.Helper()
	var svc corev1.Service
	one(t, objects, "Service", name).into(t, &svc)
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service %s has %d ports, want 1", name, len(svc.Spec.Ports))
	}
	if target := svc.Spec.Ports[0].TargetPort; target.Type == intstr.String {
		return containerPort(pod, target.StrVal)
	}
	return svc.Spec.Ports[0].TargetPort.IntVal
}

// Issue 37: webhooks.port and metrics.port are the manager's flags, its
// container ports and its Services' target ports, all agreeing; the
// defaults are the manifests' (TestChartMatchesManifests) and the Services
// keep listening on 443 and 8443.
func TestChartPorts(t *testing.T) {
	for _, tc := range []struct {
		values                map[string]any
		webhook, metrics, svc int32
	}{
		{nil, 9443, 8443, 443},
		{map[string]any{"webhooks": map[string]any{"port": 10250}}, 10250, 8443, 443},
		{map[string]any{"hostNetwork": true, "webhooks": map[string]any{"port": 10260}, "metrics": map[string]any{"port": 10261}}, 10260, 10261, 443},
	} {
		objects := render(t, "ndsl-system", tc.values)
		pod := deploymentOf(t, objects).Spec.Template.Spec
		opts := parseArgs(t, pod.Containers[0].Args)
		if opts.Webhook.Port != int(tc.webhook) || containerPort(pod, "webhook") != tc.webhook || servicePort(t, objects, "controller-manager-webhook", pod) != tc.webhook {
			t.Errorf("values %v: --webhook-port %d, container port %d, Service target %d; want all %d", tc.values,
				opts.Webhook.Port, containerPort(pod, "webhook"), servicePort(t, objects, "controller-manager-webhook", pod), tc.webhook)
		}
		if want := fmt.Sprintf(":%d", tc.metrics); opts.Generic.HTTPAddress != want ||
			containerPort(pod, "https") != tc.metrics || servicePort(t, objects, "controller-manager-metrics", pod) != tc.metrics {
			t.Errorf("values %v: --http-address %s, container port %d, Service target %d; want port %d", tc.values,
				opts.Generic.HTTPAddress, containerPort(pod, "https"), servicePort(t, objects, "controller-manager-metrics", pod), tc.metrics)
		}
		var svc corev1.Service
		one(t, objects, "Service", "controller-manager-webhook").into(t, &svc)
		if svc.Spec.Ports[0].Port != tc.svc {
			t.Errorf("values %v: webhook Service port %d, want %d", tc.values, svc.Spec.Ports[0].Port, tc.svc)
		}
	}
	for _, bad := range []map[string]any{
		{"webhooks": map[string]any{"port": 0}},
		{"webhooks": map[string]any{"port": 65536}},
		{"metrics": map[string]any{"port": "8443"}},
	} {
		if _, err := renderText(t, "ndsl-system", bad); err == nil || !strings.Contains(err.Error(), "/port") {
			t.Errorf("values %v: %v; want the schema to refuse the port", bad, err)
		}
	}
	if _, err := renderText(t, "ndsl-system", map[string]any{"webhooks": map[string]any{"port": 8443}}); err == nil || !strings.Contains(err.Error(), "must differ") {
		t.Errorf("webhooks.port = metrics.port: %v; want the chart to refuse it", err)
	}
}

// Issue 37: hostNetwork puts the pods in the nodes' network with cluster
// DNS; off (the default), neither is set.
func TestChartHostNetwork(t *testing.T) {
	pod := podOf(t, nil)
	if pod.HostNetwork || pod.DNSPolicy != "" {
		t.Errorf("defaults: hostNetwork %v, dnsPolicy %q; want neither", pod.HostNetwork, pod.DNSPolicy)
	}
	pod = podOf(t, map[string]any{"hostNetwork": true})
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork: hostNetwork %v, dnsPolicy %q; want true, %s", pod.HostNetwork, pod.DNSPolicy, corev1.DNSClusterFirstWithHostNet)
	}
}

// networkPolicyOf is the chart's NetworkPolicy, or nil.
func networkPolicyOf(t *testing.T, values map[string]any) *networkingv1.NetworkPolicy {
	t.Helper()
	for _, o := range ofKind(render(t, "ndsl-system", values), "NetworkPolicy") {
		var p networkingv1.NetworkPolicy
		o.into(t, &p)
		return &p
	}
	return nil
}

// Issue 37: networkPolicy.enabled admits ingress to the manager's pods on
// the webhook port from anywhere and on the metrics port from the selected
// namespaces only; it selects the manager's pods and leaves egress open.
func TestChartNetworkPolicy(t *testing.T) {
	if p := networkPolicyOf(t, nil); p != nil {
		t.Errorf("defaults: a NetworkPolicy %s; want none", p.Name)
	}
	selector := map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}
	values := map[string]any{
		"networkPolicy": map[string]any{"enabled": true, "metricsNamespaceSelector": selector},
		"webhooks":      map[string]any{"port": 10250},
		"metrics":       map[string]any{"port": 10261},
	}
	p := networkPolicyOf(t, values)
	if p == nil {
		t.Fatal("networkPolicy.enabled: no NetworkPolicy")
	}
	pod := deploymentOf(t, render(t, "ndsl-system", values)).Spec.Template
	for k, v := range p.Spec.PodSelector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("podSelector %v does not select the manager's pods %v", p.Spec.PodSelector.MatchLabels, pod.Labels)
		}
	}
	if len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || len(p.Spec.Egress) != 0 {
		t.Errorf("policyTypes %v, egress %v; want Ingress only", p.Spec.PolicyTypes, p.Spec.Egress)
	}
	allowed := map[int32][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range p.Spec.Ingress {
		for _, port := range rule.Ports {
			allowed[port.Port.IntVal] = rule.From
		}
	}
	if from, ok := allowed[10250]; !ok || len(from) != 0 {
		t.Errorf("webhook port: allowed %v from %v; want from anywhere", ok, from)
	}
	if from := allowed[10261]; len(from) != 1 || from[0].NamespaceSelector == nil ||
		from[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" || from[0].PodSelector != nil {
		t.Errorf("metrics port: from %v; want the monitoring namespace's pods", from)
	}
	if len(allowed) != 2 {
		t.Errorf("ports %v; want only the webhook's and the metrics'", allowed)
	}
	// The default selector, {}, is every namespace (not "anywhere", which
	// would also admit addresses outside the cluster).
	p = networkPolicyOf(t, map[string]any{"networkPolicy": map[string]any{"enabled": true}})
	for _, rule := range p.Spec.Ingress {
		if rule.Ports[0].Port.IntVal == 8443 && (len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || len(rule.From[0].NamespaceSelector.MatchLabels) != 0) {
			t.Errorf("default metricsNamespaceSelector: from %v; want every namespace", rule.From)
		}
	}
}
