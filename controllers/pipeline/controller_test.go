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

package pipeline

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

func testQueue() controller.Queue {
	return controller.NewQueue("")
}

func drain(q controller.Queue) []string {
	var keys []string
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		keys = append(keys, k.Name)
	}
	return keys
}

func TestPipelineHandlerSkipsStatusOnlyUpdates(t *testing.T) {
	q := testQueue()
	defer q.ShutDown()
	h := pipelineHandler(q)
	at := func(rv string, generation int64) *pipelinev1.Pipeline {
		return &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: rv, Generation: generation}}
	}
	h.OnUpdate(at("1", 1), at("2", 1)) // status write: skipped
	if got := drain(q); len(got) != 0 {
		t.Errorf("status-only update enqueued %v", got)
	}
	h.OnUpdate(at("2", 1), at("3", 2)) // spec change
	h.OnUpdate(at("3", 2), at("3", 2)) // resync
	h.OnAdd(at("1", 1), false)
	if got := drain(q); len(got) != 1 { // all three collapse into one key
		t.Errorf("spec change, resync and add enqueued %v, want [p]", got)
	}
}

func TestNodeIndexFindsPipelinesByLocation(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{nodeIndex: indexByNode})
	a := stored(samplePipeline()) // xx-test-node236, xx-test-node239
	a.Name = "a"
	b := stored(samplePipeline())
	b.Name = "b"
	b.Spec.Steps = b.Spec.Steps[:1]
	b.Spec.Steps[0].NodeNames = []string{"node-x", "xx-test-node239"}
	for _, p := range []*pipelinev1.Pipeline{a, b} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c := &Controller{pipelineIndexer: indexer}
	for node, want := range map[string][]string{
		"xx-test-node236": {"a"}, "xx-test-node239": {"a", "b"}, "node-x": {"b"}, "elsewhere": nil,
	} {
		var got []string
		for _, k := range c.pipelinesOnNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) {
			if k.Namespace != "" {
				t.Errorf("key %v of a cluster-scoped Pipeline has a namespace", k)
			}
			got = append(got, k.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("node %s: Pipelines %v, want %v", node, got, want)
		}
	}
}

// The objects that can block a Pipeline's children map back to it by the
// child index: its step Deployments and Services and its storage, in its
// target namespace, and nothing else.
func TestChildIndexFindsPipelinesByWantedChild(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{childIndex: indexByChild("pipeline")})
	a := stored(samplePipeline()) // steps facedetection-1 and -2, in the default namespace
	a.Name = "a"
	b := stored(samplePipeline())
	b.Name, b.Spec.Namespace = "b", "elsewhere"
	b.Spec.Steps = b.Spec.Steps[:1]
	for _, p := range []*pipelinev1.Pipeline{a, b} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c := &Controller{pipelineIndexer: indexer}
	object := func(namespace, name string) metav1.Object {
		return &metav1.ObjectMeta{Namespace: namespace, Name: name}
	}
	cases := []struct {
		kind string
		obj  metav1.Object
		want []string
	}{
		{kindService, object("pipeline", StepName("a", "facedetection-2")), []string{"a"}},
		{kindDeployment, object("pipeline", StepName("a", "facedetection-1")), []string{"a"}},
		{kindDeployment, object("elsewhere", StepName("b", "facedetection-1")), []string{"b"}},
		{kindDeployment, object("pipeline", StepName("b", "facedetection-1")), nil}, // b's children are elsewhere
		{kindService, object("pipeline", "a-facedetection-1"), nil},                 // the name 08da2b9 gave it
		{kindClaim, object("pipeline", storageName(a, "pipeline")), []string{"a"}},
		{kindVolume, object("", storageName(b, "elsewhere")), []string{"b"}},
		{kindVolume, object("", storageName(a, "elsewhere")), nil},
		{kindService, object("pipeline", storageName(a, "pipeline")), nil}, // another kind
	}
	for _, tc := range cases {
		var got []string
		for _, k := range c.pipelinesWanting(tc.kind)(tc.obj) {
			got = append(got, k.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s/%s: Pipelines %v, want %v", tc.kind, tc.obj.GetNamespace(), tc.obj.GetName(), got, tc.want)
		}
	}
}
