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

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// depthByPriority sits next to client-go's workqueue_depth, which it splits
// by priority; the other workqueue_* metrics come from client-go itself.
var (
	depthByPriority = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "workqueue",
		Name:           "depth_by_priority",
		Help:           "Current depth of a priority workqueue, per priority.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"name", "priority"})

	registerOnce sync.Once
)

// depthGauges are one queue's series of workqueue_depth_by_priority.
type depthGauges struct {
	gauges [numPriorities]metrics.GaugeMetric
}

// newDepthGauges registers the metric on first use and returns the series
// of the queue called name, at zero; nil for an unnamed queue, which, as in
// client-go, has no metrics.
func newDepthGauges(name string) *depthGauges {
	if name == "" {
		return nil
	}
	registerOnce.Do(func() { legacyregistry.MustRegister(depthByPriority) })
	d := &depthGauges{}
	for p := range d.gauges {
		d.gauges[p] = depthByPriority.WithLabelValues(name, Priority(p).String())
	}
	return d
}

func (d *depthGauges) set(p Priority, n int) { d.gauges[p].Set(float64(n)) }
