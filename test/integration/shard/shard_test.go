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
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	shards "github.com/ndsl/controller-manager/pkg/shard"
)

// counts are the --shards values the test runs side by side.
var counts = []int{1, 2, 4}

// timeout bounds every wait on the informers.
const timeout = time.Minute

// The same table on both API servers: with ShardedListAndWatch the server
// selects each shard's range (it echoes the selector in shardInfo, and the
// client filter drops nothing); without it the server sends everything and
// the client filter alone keeps each shard's range. Either way the shards of
// every count partition the objects, each in the shard its hash says.
func TestShardedInformers(t *testing.T) {
	requireSetup(t)
	t.Run("client", func(t *testing.T) { testShards(t, cp.Config, shards.PathClient) })
	t.Run("server", func(t *testing.T) { testShards(t, gated.Config, shards.PathServer) })
}

// testShards creates objects of every kind, then, streaming lists
// (WatchListClient, this project's default) and plain lists, runs an
// informer per shard and kind for every count and checks the partition, also
// of objects created after the informers started.
func testShards(t *testing.T, cfg *rest.Config, serverPath string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := newWorld(t, kubernetes.NewForConfigOrDie(cfg), versioned.NewForConfigOrDie(cfg), rand.String(5))
	for range 12 {
		ns := w.name("ns")
		w.namespace(ctx, ns)
		w.app(ctx, ns)
		w.app(ctx, ns)
		w.service(ctx, ns)
	}
	for range 16 {
		w.volume(ctx, w.pipeline(ctx))
	}
	w.volume(ctx, "")
	w.volume(ctx, "")

	for _, mode := range []struct {
		name   string
		stream bool
	}{{"watch-list", true}, {"list", false}} {
		t.Run(mode.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, mode.stream)
			w.t = t
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			inf := startInformers(ctx, t, w)

			// What was there before the informers started.
			for _, kind := range kinds {
				for _, n := range counts {
					checkPartition(t, w, inf, kind, n)
				}
				checkPath(t, inf, kind, serverPath, len(w.objects[kind]))
			}

			// What comes after: one object of each kind, then, behind it in
			// every watch, a fence in every shard; once each shard holds its
			// fence, it has seen the new object's event too.
			ns := w.name("ns")
			w.namespace(ctx, ns)
			w.app(ctx, ns)
			w.service(ctx, ns)
			w.volume(ctx, w.pipeline(ctx))
			w.fences(ctx)
			waitPlaced(t, w, inf)
			for _, kind := range kinds {
				for _, n := range counts {
					checkPartition(t, w, inf, kind, n)
				}
			}

			// A volume handed to a Pipeline of another shard moves: it
			// leaves the old shard (the filter turns the update into a
			// deletion there) and enters the new one.
			w.handOver(ctx)
			w.fences(ctx)
			waitPlaced(t, w, inf)
			checkPartition(t, w, inf, volumes, 2)
			checkPartition(t, w, inf, volumes, 4)
		})
	}
}

// informers are the running informers, per kind, count and shard.
type informers map[string]map[int][]*shardInformer

type shardInformer struct {
	lw       *shards.ListerWatcher
	informer cache.SharedIndexInformer
}

// startInformers runs an informer per shard of every count for every kind
// and waits until all synced.
func startInformers(ctx context.Context, t *testing.T, w *world) informers {
	t.Helper()
	inf := informers{}
	var synced []cache.InformerSynced
	for _, kind := range kinds {
		inf[kind] = map[int][]*shardInformer{}
		for _, n := range counts {
			all, err := shards.All(n)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range all {
				lw, obj := w.listWatch(kind)
				slw := shards.NewListerWatcher(lw, s, keyOf[kind], kind)
				informer := cache.NewSharedIndexInformer(slw, obj, 0, cache.Indexers{})
				go informer.RunWithContext(ctx)
				inf[kind][n] = append(inf[kind][n], &shardInformer{lw: slw, informer: informer})
				synced = append(synced, informer.HasSynced)
			}
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("the informers did not sync")
	}
	return inf
}

// checkPartition checks that the shards of n hold every object of kind in
// exactly one shard, the one its hash says, and nothing else.
func checkPartition(t *testing.T, w *world, inf informers, kind string, n int) {
	t.Helper()
	want := w.objects[kind]
	in := map[string][]int{}
	for i, si := range inf[kind][n] {
		for _, key := range si.informer.GetStore().ListKeys() {
			in[key] = append(in[key], i)
			value, ok := want[key]
			if !ok {
				t.Errorf("%s: shard %d/%d holds %s, which the test did not create", kind, i, n, key)
				continue
			}
			if o := oraclePlace(value, n); o != i {
				t.Errorf("%s: %s is in shard %d/%d, its hash places it in %d", kind, key, i, n, o)
			}
		}
	}
	for key := range want {
		if len(in[key]) != 1 {
			t.Errorf("%s: %s is in shards %v of %d, want exactly one", kind, key, in[key], n)
		}
	}
}

// checkPath checks where each shard's range was selected: on the server
// path the server for the keys it can select by, with nothing for the
// client to drop; on the client elsewhere, the client dropping each object
// in all shards but its own.
func checkPath(t *testing.T, inf informers, kind, serverPath string, objects int) {
	t.Helper()
	for _, n := range counts {
		var dropped int64
		for i, si := range inf[kind][n] {
			want := shards.PathClient
			if serverPath == shards.PathServer && keyOf[kind].Serverside() {
				want = shards.PathServer
			}
			if n == 1 {
				want = "" // one shard selects nothing
			}
			if got := si.lw.Path(); got != want {
				t.Errorf("%s: shard %d/%d selected on %q, want %q", kind, i, n, got, want)
			}
			dropped += si.lw.Dropped()
		}
		wantDropped := int64((n - 1) * objects)
		if serverPath == shards.PathServer && keyOf[kind].Serverside() {
			wantDropped = 0
		}
		if dropped != wantDropped {
			t.Errorf("%s: the client filters of %d shards dropped %d objects, want %d", kind, n, dropped, wantDropped)
		}
	}
}

// waitPlaced waits until every object is in the shard its hash says, for
// every kind and count.
func waitPlaced(t *testing.T, w *world, inf informers) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, kind := range kinds {
			for _, n := range counts {
				for key, value := range w.objects[kind] {
					if _, ok, _ := inf[kind][n][oraclePlace(value, n)].informer.GetStore().GetByKey(key); !ok {
						return false, nil
					}
				}
			}
		}
		return true, nil
	})
	if err != nil {
		for _, kind := range kinds {
			for _, n := range counts {
				checkPartition(t, w, inf, kind, n)
			}
		}
		t.Fatalf("not every object reached the shard its hash says within %s", timeout)
	}
}

// fences creates, behind everything created so far, one object of every
// kind in each of the 4 shards (and so in each shard of 2 and 1).
func (w *world) fences(ctx context.Context) {
	w.t.Helper()
	var namespaces [4]string
	for missing := 4; missing > 0; {
		ns := w.name("fence")
		if i := oracleNamespaceShard(ns, 4); namespaces[i] == "" {
			namespaces[i] = ns
			missing--
		}
	}
	for _, ns := range namespaces {
		w.namespace(ctx, ns)
		w.app(ctx, ns)
		w.service(ctx, ns)
	}
	var owners [4]string
	for tries := 0; owners[0] == "" || owners[1] == "" || owners[2] == "" || owners[3] == ""; tries++ {
		if tries == 64 {
			w.t.Fatal("64 Pipelines did not cover 4 shards")
		}
		uid := w.pipeline(ctx)
		owners[oracleShard(uid, 4)] = uid
	}
	for _, uid := range owners {
		w.volume(ctx, uid)
	}
}

// handOver gives a volume a controller in the other shard of 2, and of 4.
func (w *world) handOver(ctx context.Context) {
	w.t.Helper()
	for name, from := range w.objects[volumes] {
		if !strings.HasPrefix(from, "uid:") {
			continue
		}
		from = strings.TrimPrefix(from, "uid:")
		for _, to := range w.pipelineUIDs {
			if oracleShard(to, 2) == oracleShard(from, 2) {
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":"Pipeline","name":"owner","uid":%q,"controller":true}]}}`,
				pipelinev1beta1.SchemeGroupVersion.String(), to)
			if _, err := w.kube.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				w.t.Fatalf("handing PersistentVolume %s over: %v", name, err)
			}
			w.objects[volumes][name] = "uid:" + to
			return
		}
	}
	w.t.Fatal("no volume and Pipeline in different shards")
}
