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
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Where a shard's range is selected, the values of the path label.
const (
	// PathServer: the API server applied the shard selector (it echoed it
	// in ListMeta.ShardInfo); the client filter drops nothing.
	PathServer = "server"
	// PathClient: the API server sent the whole collection (the gate
	// ShardedListAndWatch is off, the server predates it, or the key is not
	// one it can select by); the client filter drops the other shards.
	PathClient = "client"
)

var (
	selectionPath = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "controller_manager",
		Name:      "shard_selection",
		Help:      "1 for where a shard's range of a resource is selected (path: server, client), as the API server answered the probe at the informer's start.",
	}, []string{"resource", "shard", "path"})

	clientFiltered = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "controller_manager",
		Name:      "shard_client_filtered_total",
		Help:      "Objects and watch events of other shards that the API server sent and the client dropped, per resource; zero where the server selects.",
	}, []string{"resource"})

	registerOnce sync.Once
)

// RegisterMetrics adds the shard metrics to the legacy registry served on
// /metrics. Safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(selectionPath, clientFiltered)
	})
}

// recordPath sets the path of resource's shard s to path, the other to 0.
func recordPath(resource string, s Shard, path string) {
	for _, p := range []string{PathServer, PathClient} {
		v := 0.0
		if p == path {
			v = 1
		}
		selectionPath.WithLabelValues(resource, s.String(), p).Set(v)
	}
}
