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
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Both replicas serve the webhooks, leader or not. Kill -9 one of them
// while Apps are being created through v1, which the conversion webhook
// converts to the stored v1beta1 (their admission is the API server's
// policies): the balancer (the Service, in a cluster) stops sending it
// connections, and the webhooks keep working on the other. Only a request
// the dead replica was answering at that instant may fail.
func TestWebhooksSurviveAKilledReplica(t *testing.T) {
	requireProcesses(t)
	if launcher.Webhooks == nil {
		t.Skip("the webhooks need the local control plane, whose API server calls this machine")
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	appsV1 := schema.GroupVersionResource{Group: "ingress.example.com", Version: "v1", Resource: "apps"}
	procs := startManagers(t, 2, shortLease.args()...)
	ns := newNamespace(t)
	createApp(t, ns, newApp("before-kill", 1, true))

	type result struct {
		started time.Time
		err     error
	}
	var (
		mu      sync.Mutex
		results []result
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			started := time.Now()
			app := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "ingress.example.com/v1", "kind": "App",
				"metadata": map[string]any{"name": fmt.Sprintf("stream-%d", i)},
				"spec":     map[string]any{"image": workloadImage(), "replicas": int64(1), "exposure": "Service"},
			}}
			_, err := dyn.Resource(appsV1).Namespace(ns).Create(context.Background(), app, metav1.CreateOptions{})
			mu.Lock()
			results = append(results, result{started, err})
			mu.Unlock()
			time.Sleep(50 * time.Millisecond) // a steady trickle, not a load test
		}
	})

	eventually(t, 30*time.Second, "creates admitted before the kill", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(results) >= 10, nil
	})
	victim := procs[0]
	if err := victim.Signal(9); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := victim.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "creates admitted after the kill", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		after := 0
		for _, r := range results {
			if r.started.After(killed.Add(time.Second)) {
				after++
			}
		}
		return after >= 20, nil
	})
	cancel()
	wg.Wait()

	inFlight := 0
	for _, r := range results {
		switch {
		case r.err == nil:
		case r.started.Before(killed) || r.started.Before(killed.Add(time.Second)):
			// Answered (or about to be) by the victim when it died.
			inFlight++
			t.Logf("create started %s before the kill failed: %v", killed.Sub(r.started), r.err)
		default:
			t.Errorf("create started %s after the kill failed: %v", r.started.Sub(killed), r.err)
		}
	}
	t.Logf("%d creates, %d in flight at the kill failed", len(results), inFlight)
	if inFlight > 2 {
		t.Errorf("%d creates failed around the kill; at most the ones in flight may", inFlight)
	}
}
