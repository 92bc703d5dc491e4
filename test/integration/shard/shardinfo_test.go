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

package shard

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
)

// firstHalf is shard 0 of 2 by namespace, as the API server takes it.
const firstHalf = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"

// What the API servers answer to a shard selector, the facts pkg/shard's
// probe rests on: with the gate, the server filters every list and a
// streaming list's initial events, but echoes the selector in
// ListMeta.ShardInfo only on a built-in type's typed list, not on a custom
// resource's list (served unstructured), nor on a metadata-only list, nor
// in a streaming list, which has no ListMeta; without the gate it ignores
// the selector silently.
func TestShardInfo(t *testing.T) {
	requireSetup(t)
	for _, tc := range []struct {
		name  string
		cfg   *rest.Config
		gated bool
	}{{"server", gated.Config, true}, {"client", cp.Config, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w := newWorld(t, kubernetes.NewForConfigOrDie(tc.cfg), versioned.NewForConfigOrDie(tc.cfg), rand.String(5))
			// A namespace in each half, an App and a Service in each.
			var halves [2]string
			for halves[0] == "" || halves[1] == "" {
				ns := w.name("ns")
				halves[oracleShard(ns, 2)] = ns
			}
			for _, ns := range halves {
				w.namespace(ctx, ns)
				w.app(ctx, ns)
				w.service(ctx, ns)
			}
			opts := metav1.ListOptions{LabelSelector: w.selector(), ShardSelector: firstHalf}
			metadataClient := metadata.NewForConfigOrDie(tc.cfg)

			services, err := w.kube.CoreV1().Services("").List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			wantEcho := ""
			if tc.gated {
				wantEcho = firstHalf
			}
			checkList(t, "a typed list of Services", services, tc.gated, wantEcho, halves[0])

			apps, err := w.crd.AppV1beta1().Apps("").List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, "a list of Apps, a custom resource", apps, tc.gated, "", halves[0])

			partial, err := metadataClient.Resource(corev1.SchemeGroupVersion.WithResource("services")).List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, "a metadata-only list of Services", partial, tc.gated, "", halves[0])

			checkStream(ctx, t, w, tc.gated, halves[0])
		})
	}
}

// checkList checks that list holds only the objects of namespace first if
// filtered, both namespaces' if not, and echoes wantEcho as ShardInfo.
func checkList(t *testing.T, what string, list runtime.Object, filtered bool, wantEcho, first string) {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	inFirst := 0
	for _, item := range items {
		if o, _ := meta.Accessor(item); o.GetNamespace() == first {
			inFirst++
		}
	}
	if inFirst != 1 || filtered != (len(items) == 1) || (!filtered && len(items) != 2) {
		t.Errorf("%s holds %d objects, %d of the first half; want %d", what, len(items), inFirst, map[bool]int{true: 1, false: 2}[filtered])
	}
	echo := ""
	if sl, ok := list.(interface{ GetShardInfo() *metav1.ShardInfo }); ok && sl.GetShardInfo() != nil {
		echo = sl.GetShardInfo().Selector
	}
	if echo != wantEcho {
		t.Errorf("%s echoes shard selector %q, want %q", what, echo, wantEcho)
	}
}

// checkStream checks a streaming list (WatchListClient's request): its
// initial events are filtered like a list, and the bookmark that ends them
// is a bare Service, no list, so there is nothing to echo the selector in.
func checkStream(ctx context.Context, t *testing.T, w *world, filtered bool, first string) {
	t.Helper()
	watcher, err := w.kube.CoreV1().Services("").Watch(ctx, metav1.ListOptions{
		LabelSelector:        w.selector(),
		ShardSelector:        firstHalf,
		SendInitialEvents:    ptr.To(true),
		AllowWatchBookmarks:  true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	var initial []string
	for {
		select {
		case <-ctx.Done():
			t.Fatal("no bookmark ended the initial events")
		case ev := <-watcher.ResultChan():
			switch ev.Type {
			case watch.Added:
				initial = append(initial, ev.Object.(*corev1.Service).Namespace)
				continue
			case watch.Bookmark:
				svc, ok := ev.Object.(*corev1.Service)
				if !ok || svc.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					continue
				}
				if svc.Name != "" || svc.ResourceVersion == "" {
					t.Errorf("the bookmark ending the initial events is %q at resourceVersion %q, want a bare Service", svc.Name, svc.ResourceVersion)
				}
			default:
				t.Fatalf("unexpected %s event in a streaming list", ev.Type)
			}
		}
		break
	}
	want := 2
	if filtered {
		want = 1
	}
	if len(initial) != want || !slices.Contains(initial, first) {
		t.Errorf("a streaming list's initial events are of namespaces %v; want %d, %s among them", initial, want, first)
	}
}
