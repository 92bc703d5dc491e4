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
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// recordingProvider is a workqueue.MetricsProvider keeping the last value
// of each metric.
type recordingProvider struct {
	mu     sync.Mutex
	values map[string]float64
}

type recorded struct {
	p    *recordingProvider
	name string
}

func (r recorded) change(f func(float64) float64) {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	r.p.values[r.name] = f(r.p.values[r.name])
}
func (r recorded) Inc()              { r.change(func(v float64) float64 { return v + 1 }) }
func (r recorded) Dec()              { r.change(func(v float64) float64 { return v - 1 }) }
func (r recorded) Set(v float64)     { r.change(func(float64) float64 { return v }) }
func (r recorded) Observe(v float64) { r.p.observe(r.name) }

func (p *recordingProvider) observe(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.values[name+"_count"]++
}

func (p *recordingProvider) get(name string) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.values[name]
}

func (p *recordingProvider) NewDepthMetric(string) workqueue.GaugeMetric { return recorded{p, "depth"} }
func (p *recordingProvider) NewAddsMetric(string) workqueue.CounterMetric {
	return recorded{p, "adds"}
}
func (p *recordingProvider) NewLatencyMetric(string) workqueue.HistogramMetric {
	return recorded{p, "latency"}
}
func (p *recordingProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return recorded{p, "work_duration"}
}
func (p *recordingProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return recorded{p, "unfinished_work_seconds"}
}
func (p *recordingProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return recorded{p, "longest_running_processor_seconds"}
}
func (p *recordingProvider) NewRetriesMetric(string) workqueue.CounterMetric {
	return recorded{p, "retries"}
}

func TestWorkqueueMetrics(t *testing.T) {
	const name = "metrics-test"
	provider := &recordingProvider{values: map[string]float64{}}
	clk := clocktesting.NewFakeClock(time.Now())
	q := New(Config[string]{Name: name, MetricsProvider: provider, Clock: clk})
	defer q.ShutDown()

	byPriority := func(p Priority) float64 {
		v, err := testutil.GetGaugeMetricValue(depthByPriority.WithLabelValues(name, p.String()))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	expect := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}

	q.AddWithPriority("a", Low)
	q.AddWithPriority("b", Low)
	q.AddWithPriority("c", High)
	q.AddWithPriority("a", High) // promoted: not a new add
	expect("depth", provider.get("depth"), 3)
	expect("adds", provider.get("adds"), 3)
	expect("depth_by_priority high", byPriority(High), 2)
	expect("depth_by_priority low", byPriority(Low), 1)

	item, _ := q.Get()
	expect("latency observations", provider.get("latency_count"), 1)
	expect("depth after Get", provider.get("depth"), 2)
	expect("depth_by_priority high after Get", byPriority(High), 1)
	waitFor(t, "unfinished work and longest running to be reported", func() bool {
		clk.Step(500 * time.Millisecond) // the queue's reporting period
		return provider.get("unfinished_work_seconds") >= 3 && provider.get("longest_running_processor_seconds") >= 3
	})
	q.Done(item)
	expect("work duration observations", provider.get("work_duration_count"), 1)

	q.AddRateLimited("d")
	expect("retries", provider.get("retries"), 1)
}
