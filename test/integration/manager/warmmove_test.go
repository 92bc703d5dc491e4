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

package manager

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/layout/layouttest"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// caching is a shard controller that caches the Services of its range and
// records, each time it starts, whether its cache had synced already and
// when it started.
type caching struct {
	name     string
	replica  string
	informer cache.SharedIndexInformer
	starts   *startLog
}

type start struct {
	unit    string
	replica string
	at      time.Time
	synced  bool
	cached  int
}

type startLog struct {
	mu     sync.Mutex
	starts []start
}

func (l *startLog) add(s start) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, s)
}

func (l *startLog) all() []start {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]start(nil), l.starts...)
}

func (c *caching) Name() string    { return c.name }
func (c *caching) HasSynced() bool { return c.informer.HasSynced() }
func (c *caching) Run(ctx context.Context) {
	c.starts.add(start{unit: c.name, replica: c.replica, at: time.Now(), synced: c.informer.HasSynced(), cached: len(c.informer.GetStore().ListKeys())})
	waitStop(ctx)
}

// When a replica joins, the shards it is assigned move to it warm: it
// builds them and syncs their caches while their holder still leads them,
// and the holder hands them over only then, so the joiner's first term of
// each starts with its cache full (issue 36, warm moves). Before, the
// joiner built a shard when it took the Lease and started with nothing
// cached. So do the shards of a replica that stops (SIGTERM): it leaves
// first and drains each once its new assignee states it warm; before, it
// drained at once and the assignee built the shard as it took it.
func TestShardsMoveWarmToAJoiningReplica(t *testing.T) {
	ctx := context.Background()
	leaseNS := framework.CreateNamespace(t, cp.Client)
	const shards = 4
	createServices(t, 8, 150)
	log := &startLog{}
	start := func(replica string) *framework.Manager {
		registry := app.Registry{{
			Name:      "cached",
			ShardKeys: map[string]shard.Key{"services": shard.Namespace},
			New: func(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
				informer := cc.InformerFactory.Core().V1().Services().Informer()
				return &caching{name: cc.UnitName("cached"), replica: replica, informer: informer, starts: log}, nil
			},
		}}
		return framework.StartManagerWith(t, cp.Config, registry, func(o *options.Options) {
			shortLease(leaseNS, "warm")(o)
			o.Generic.Controllers = []string{"*"}
			o.HA.PerController = true
			o.HA.Shards = shards
			o.Generic.ShutdownTimeout = 10 * time.Second
		})
	}
	replicas := map[string]*framework.Manager{"a": start("a")}
	var names []string
	for i := range shards {
		names = append(names, fmt.Sprintf("cached-%d-of-%d", i, shards))
	}
	framework.Eventually(t, 60*time.Second, "a leads every shard", func(context.Context) (bool, error) {
		return len(controllersLed(t, replicas["a"])) == shards, nil
	})
	releases := layouttest.Start(t, cp.Client, leaseNS, "warm", nil)
	joined := time.Now()
	replicas["b"] = start("b")
	var ledBy map[string]string
	framework.Eventually(t, 60*time.Second, "a and b share the shards", func(context.Context) (bool, error) {
		var err error
		if ledBy, err = ledByReplica(t, replicas); err != nil {
			return false, err
		}
		return balanced(ledBy, names, replicas), nil
	})
	t.Logf("a and b lead 2 shards each %v after b started: %s", time.Since(joined).Round(time.Millisecond), loads(ledBy))
	// Every term b began, each a shard moved to it, began with a full
	// cache. (A shard that goes back to a right after the join, as the
	// assignment settles, a takes back as it can: it led it a moment ago.)
	moved := 0
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		moved = 0
		for _, s := range log.all() {
			if s.replica == "b" {
				moved++
			}
		}
		return moved >= 2, nil
	}); err != nil {
		t.Fatalf("%d shards started on b, want 2", moved)
	}
	for _, s := range log.all() {
		if !s.at.After(joined) {
			t.Logf("%s started on %s %v before b started, its cache synced: %v (%d Services)", s.unit, s.replica, joined.Sub(s.at).Round(time.Millisecond), s.synced, s.cached)
			continue
		}
		t.Logf("%s started on %s %v after b started, %v after its Lease was released; its cache synced: %v (%d Services)", s.unit, s.replica,
			s.at.Sub(joined).Round(time.Millisecond), s.at.Sub(releases.Released("warm-"+s.unit)).Round(time.Millisecond), s.synced, s.cached)
		if s.replica == "b" && !s.synced {
			t.Errorf("%s moved to b and started with its cache not synced: a cold move", s.unit)
		}
	}

	// a stops (SIGTERM): it leaves, and hands its shards over once b
	// states them warm.
	fromA := map[string]bool{}
	for unit, r := range ledBy {
		if r == "a" {
			fromA[unit] = true
		}
	}
	stopped := time.Now()
	if err := replicas["a"].Stop(); err != nil {
		t.Fatalf("a's shutdown returned %v", err)
	}
	delete(replicas, "a")
	framework.Eventually(t, 60*time.Second, "b leads every shard after a stopped", func(context.Context) (bool, error) {
		return len(controllersLed(t, replicas["b"])) == shards, nil
	})
	for _, s := range log.all() {
		if !s.at.After(stopped) {
			continue
		}
		t.Logf("%s started on %s %v after a got SIGTERM, %v after its Lease was released; its cache synced: %v (%d Services)", s.unit, s.replica,
			s.at.Sub(stopped).Round(time.Millisecond), s.at.Sub(releases.Released("warm-"+s.unit)).Round(time.Millisecond), s.synced, s.cached)
		if fromA[s.unit] && !s.synced {
			t.Errorf("%s moved from a, stopped, to b and started with its cache not synced: a cold move", s.unit)
		}
	}
}

// createServices creates perNamespace headless Services in each of
// namespaces new namespaces, for shard controllers to cache.
func createServices(t *testing.T, namespaces, perNamespace int) {
	for range namespaces {
		ns := framework.CreateNamespace(t, cp.Client)
		for i := range perNamespace {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)},
				Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}
			if _, err := cp.Client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
