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
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "controller_manager"

// Reconcile results, the values of the result label.
const (
	resultSuccess = "success"
	resultRequeue = "requeue"
	resultError   = "error"
	resultPanic   = "panic"
)

var (
	reconcileTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "reconcile_total",
		Help:      "Reconciles per controller and result (success, requeue, error, panic).",
	}, []string{"controller", "result"})

	reconcileErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "reconcile_errors_total",
		Help:      "Reconciles that returned an error or panicked, per controller.",
	}, []string{"controller"})

	reconcilePanics = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "reconcile_panics_total",
		Help:      "Reconciles that panicked and were recovered, per controller.",
	}, []string{"controller"})

	reconcileDropped = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "reconcile_dropped_total",
		Help:      "Keys dropped after exhausting their retries, per controller.",
	}, []string{"controller"})

	reconcileDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: metricsSubsystem,
		Name:      "reconcile_duration_seconds",
		Help:      "Time spent in one reconcile, per controller.",
		Buckets:   []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"controller"})

	activeWorkers = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "active_workers",
		Help:      "Workers currently running a reconcile, per controller.",
	}, []string{"controller"})

	standbyPendingKeys = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "standby_pending_keys",
		Help:      "Keys a controller that does not run (a warm standby) holds for when it leads, per controller; they are not in workqueue_depth.",
	}, []string{"controller"})

	cachesSynced = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: metricsSubsystem,
		Name:      "caches_synced",
		Help:      "1 once the informers a controller reads have synced on this replica, else 0; in per-controller mode a replica offers a controller to the others only then.",
	}, []string{"controller"})

	registerOnce sync.Once
)

// RegisterMetrics adds the reconcile metrics to the legacy registry served on
// /metrics. Safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(reconcileTotal, reconcileErrors, reconcilePanics,
			reconcileDropped, reconcileDuration, activeWorkers, standbyPendingKeys, cachesSynced)
	})
}

// SetCachesSynced records whether the informers a controller reads have
// synced on this replica.
func SetCachesSynced(controller string, synced bool) {
	RegisterMetrics()
	v := 0.0
	if synced {
		v = 1
	}
	cachesSynced.WithLabelValues(controller).Set(v)
}

// initMetrics creates a controller's series at zero, so that they are
// exported (and rate() works) before the first error or panic happens.
func initMetrics(controller string) {
	for _, result := range []string{resultSuccess, resultRequeue, resultError, resultPanic} {
		reconcileTotal.WithLabelValues(controller, result)
	}
	reconcileErrors.WithLabelValues(controller)
	reconcilePanics.WithLabelValues(controller)
	reconcileDropped.WithLabelValues(controller)
	activeWorkers.WithLabelValues(controller)
}
