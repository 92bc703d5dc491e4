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
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// Every value set renders objects the real kube-apiserver accepts: each is
// applied with dry run (server-side apply, validated and defaulted, not
// stored). The kinds of cert-manager and the Prometheus Operator, whose CRDs
// this API server does not have, are checked in values_test.go instead.
func TestChartRendersValidObjects(t *testing.T) {
	const ns = "dry-run"
	ctx := context.Background()
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	for name, values := range map[string]map[string]any{
		"defaults":                     nil,
		"everything":                   everything("self"),
		"everything with cert-manager": everything("cert-manager"),
		"no webhooks":                  {"webhooks": map[string]any{"enabled": false}, "replicas": 1, "leaderElection": map[string]any{"enabled": false}},
		"host network": {"hostNetwork": true, "webhooks": map[string]any{"port": 10260}, "metrics": map[string]any{"port": 10261},
			"networkPolicy": map[string]any{"enabled": true, "metricsNamespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			applied := 0
			for _, o := range render(t, ns, values) {
				gvk := schema.FromAPIVersionAndKind(o["apiVersion"].(string), o.kind())
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if meta.IsNoMatchError(err) && (gvk.Group == "cert-manager.io" || gvk.Group == "monitoring.coreos.com") {
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", o.key(), err)
				}
				data, err := json.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				var client dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
				if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
					client = dyn.Resource(mapping.Resource).Namespace(o.namespace())
				}
				if _, err := client.Patch(ctx, o.name(), types.ApplyPatchType, data, metav1.PatchOptions{
					FieldManager: "chart-test", Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}}); err != nil {
					t.Errorf("%s: the API server refuses it: %v", o.key(), err)
				}
				applied++
			}
			if applied < 20 {
				t.Errorf("only %d objects applied", applied)
			}
		})
	}
}
