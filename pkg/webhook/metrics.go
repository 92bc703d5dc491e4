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

package webhook

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "controller_manager_webhook"

var (
	requestsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "requests_total",
		Help:      "Webhook requests per webhook and HTTP status code.",
	}, []string{"webhook", "code"})

	requestDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: metricsSubsystem,
		Name:      "request_duration_seconds",
		Help:      "Time to answer one webhook request, per webhook.",
		Buckets:   []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"webhook"})

	rejectionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "rejections_total",
		Help:      "Admission requests denied, per webhook (including internal errors and panics).",
	}, []string{"webhook"})

	// errorsTotal is what the alert on webhook errors divides by
	// requestsTotal: requests the webhook failed to serve, as opposed to
	// requests it served with a denial (rejectionsTotal).
	errorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "errors_total",
		Help:      "Webhook requests that failed, per webhook: answered with an HTTP status of 500 or more, admission responses with a result code of 500 or more (a handler's internal error or panic), and failed conversions.",
	}, []string{"webhook"})

	conversionErrorsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "conversion_errors_total",
		Help:      "ConversionReviews answered with a failure, per webhook.",
	}, []string{"webhook"})

	registerOnce sync.Once
)

// RegisterMetrics adds the webhook metrics to the legacy registry served on
// /metrics. Safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(requestsTotal, requestDuration, rejectionsTotal, errorsTotal, conversionErrorsTotal)
	})
}

// initAdmissionMetrics and initConversionMetrics create a webhook's error
// series at zero, so that rate() works before the first rejection.
func initAdmissionMetrics(name string) {
	RegisterMetrics()
	rejectionsTotal.WithLabelValues(name)
	errorsTotal.WithLabelValues(name)
}

func initConversionMetrics(name string) {
	RegisterMetrics()
	conversionErrorsTotal.WithLabelValues(name)
	errorsTotal.WithLabelValues(name)
}
