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

package cleanup

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	sweepsTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem: "controller_manager_cleanup",
		Name:      "sweeps_total",
		Help:      "Sweeps run by the cleanup controller.",
	})
	staleObjects = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "controller_manager_cleanup",
		Name:      "stale_objects",
		Help:      "Objects found stale by the last sweep, per kind, whether or not their stale period has passed.",
	}, []string{"kind"})
	removedTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "controller_manager_cleanup",
		Name:      "removed_total",
		Help:      "Stale objects removed (or, in dry-run mode, that would have been removed), per kind.",
	}, []string{"kind", "dry_run"})
	sweepDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem: "controller_manager_cleanup",
		Name:      "sweep_duration_seconds",
		Help:      "Time one sweep takes.",
		Buckets:   metrics.ExponentialBuckets(0.001, 4, 10),
	})
	registerOnce sync.Once
)

// Metrics are the controller's own metrics, which its descriptor lists.
var Metrics = []metrics.Registerable{sweepsTotal, staleObjects, removedTotal, sweepDuration}

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(Metrics...)
	})
}
