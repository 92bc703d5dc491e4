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

package priorityqueue

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Producers add keys at random priorities, bumping a version per key before
// each add, while workers process them. The contract under -race: no key
// is processed by two workers at once, and every key is processed after its
// last add, so the last version a worker saw is the last version written.
func TestConcurrentAddsAndWorkers(t *testing.T) {
	const (
		keys      = 50
		producers = 8
		adds      = 2000
		workers   = 6
	)
	q := newTestQueue(t)
	var (
		versions [keys]atomic.Int64
		mu       sync.Mutex
		inFlight = map[string]bool{}
		seen     = map[string]int64{}
		overlap  atomic.Bool
	)
	var workersWG sync.WaitGroup
	for range workers {
		workersWG.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if inFlight[item] {
					overlap.Store(true)
				}
				inFlight[item] = true
				mu.Unlock()

				var i int
				fmt.Sscanf(item, "k%d", &i)
				v := versions[i].Load()

				mu.Lock()
				delete(inFlight, item)
				seen[item] = max(seen[item], v)
				mu.Unlock()
				q.Done(item)
			}
		})
	}
	var producersWG sync.WaitGroup
	for p := range producers {
		producersWG.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 1))
			for range adds {
				i := r.IntN(keys)
				versions[i].Add(1)
				key := fmt.Sprintf("k%d", i)
				switch r.IntN(4) {
				case 0:
					q.Add(key)
				case 1:
					q.AddWithPriority(key, High)
				default:
					q.AddWithPriority(key, Low)
				}
			}
		})
	}
	producersWG.Wait()
	waitFor(t, "the workers to drain the queue", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range keys {
			if seen[fmt.Sprintf("k%d", i)] != versions[i].Load() {
				return false
			}
		}
		return true
	})
	q.ShutDownWithDrain()
	workersWG.Wait()
	if overlap.Load() {
		t.Fatal("a key was processed by two workers at once")
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("Len = %d after the drain, want 0", n)
	}
}

// Racing a Low and a High add of one queued key must leave it at High,
// whatever the interleaving.
func TestConcurrentLowAndHighAddsPromote(t *testing.T) {
	for range 200 {
		q := New(Config[string]{})
		q.AddWithPriority("backlog", Low)
		q.AddWithPriority("k", Low)
		var wg sync.WaitGroup
		wg.Go(func() { q.AddWithPriority("k", High) })
		wg.Go(func() { q.AddWithPriority("k", Low) })
		wg.Wait()
		expectOrder(t, q, "k", "backlog")
		q.ShutDown()
	}
}
