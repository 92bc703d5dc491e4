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

package membership

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	membersGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "controller_manager",
		Name:      "members",
		Help:      "Live replicas sharing the controllers, as this replica sees them (itself included while its renewals succeed), per group (the leader election resource name).",
	}, []string{"group"})

	assignedGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "controller_manager",
		Name:      "assigned_units",
		Help:      "Units of work (controllers) membership assigns to this replica, per group.",
	}, []string{"group"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(membersGauge, assignedGauge)
	})
}
