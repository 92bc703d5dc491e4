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

package podmetrics

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func pod(name string, labels map[string]string, phase corev1.PodPhase, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	return p
}

// TestServesRunningPodsOfSelector checks what the HPA controller reads:
// the discovery document, and per pod the usage of the test's function on
// the first container and zero on the others, for the Running pods the
// label selector matches.
func TestServesRunningPodsOfSelector(t *testing.T) {
	client := fake.NewClientset(
		pod("web-1", map[string]string{"app": "web"}, corev1.PodRunning, "app", "sidecar"),
		pod("web-2", map[string]string{"app": "web"}, corev1.PodPending, "app"),
		pod("db-1", map[string]string{"app": "db"}, corev1.PodRunning, "db"),
	)
	s, err := Start(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetUsage("ns", func(*corev1.Pod) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	})
	get := func(path string, into any) {
		t.Helper()
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test server
		resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d%s", s.Port, path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatal(err)
		}
	}

	var resources metav1.APIResourceList
	get("/apis/metrics.k8s.io/v1beta1", &resources)
	if resources.GroupVersion != "metrics.k8s.io/v1beta1" || len(resources.APIResources) != 1 || resources.APIResources[0].Name != "pods" {
		t.Errorf("discovery = %+v", resources)
	}

	var list podMetricsList
	get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods?labelSelector="+url.QueryEscape("app=web"), &list)
	if len(list.Items) != 1 || list.Items[0].Name != "web-1" {
		t.Fatalf("items = %+v, want web-1 only (Running, selected)", list.Items)
	}
	c := list.Items[0].Containers
	if len(c) != 2 || c[0].Usage.Memory().String() != "1Gi" || !c[1].Usage.Memory().IsZero() {
		t.Errorf("containers = %+v, want 1Gi on app and 0 on sidecar", c)
	}

	var one podMetrics
	get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/db-1", &one)
	if one.Name != "db-1" || one.Containers[0].Usage.Memory().String() != "1Gi" {
		t.Errorf("db-1 = %+v", one)
	}

	s.SetUsage("ns", nil)
	get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods", &list)
	if len(list.Items) != 0 {
		t.Errorf("without usage: items = %+v, want none", list.Items)
	}
}
