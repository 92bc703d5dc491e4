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

package controller

import (
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/ndsl/controller-manager/pkg/controller/priorityqueue"
)

// retriesOnly counts workqueue_retries_total and ignores the other metrics.
type retriesOnly struct{ retries atomic.Int64 }

type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}

type retryCounter struct{ n *atomic.Int64 }

func (c retryCounter) Inc() { c.n.Add(1) }

func (p *retriesOnly) NewDepthMetric(string) workqueue.GaugeMetric            { return noMetric{} }
func (p *retriesOnly) NewAddsMetric(string) workqueue.CounterMetric           { return noMetric{} }
func (p *retriesOnly) NewLatencyMetric(string) workqueue.HistogramMetric      { return noMetric{} }
func (p *retriesOnly) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noMetric{} }
func (p *retriesOnly) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (p *retriesOnly) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (p *retriesOnly) NewRetriesMetric(string) workqueue.CounterMetric {
	return retryCounter{&p.retries}
}

// A batched change is not a retry: workqueue_retries_total{name="pipeline"}
// counted every child change the Pipeline controller batched.
func TestBatchedChangesAreNotCountedAsRetries(t *testing.T) {
	provider := &retriesOnly{}
	q := priorityqueue.New(priorityqueue.Config[Key]{Name: "batched-retries", MetricsProvider: provider})
	defer q.ShutDown()
	bq := Batched(q, 10*time.Millisecond)
	for i := range 5 {
		bq.Add(Key{Name: "p"})
		bq.AddWithPriority(Key{Name: "q"}, PriorityHigh+priorityqueue.Priority(i%2))
	}
	waitFor(t, "the batched keys", func() bool { return q.Len() == 2 })
	if n := provider.retries.Load(); n != 0 {
		t.Errorf("workqueue_retries_total grew by %d for batched changes, want 0", n)
	}
	// A real retry still counts.
	before := provider.retries.Load()
	q.AddRateLimited(Key{Name: "failed"})
	waitFor(t, "a retry to be counted", func() bool { return provider.retries.Load() == before+1 })
}
