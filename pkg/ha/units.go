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

package ha

import (
	"fmt"

	"github.com/ndsl/controller-manager/pkg/shard"
)

// Controller is what the runner knows of a controller: its name, and
// whether --shards splits it.
type Controller struct {
	Name string
	// Splits: the controller places its objects in shards (it has shard
	// keys), so --shards runs it as one unit per shard.
	Splits bool
}

// Unit is what one Lease covers in per-controller mode: a controller, or
// with --shards one shard of a controller that splits. Its Name
// (<controller> or <controller>-<i>-of-<n>) names its Lease suffix, queue,
// metrics, clients and status entry. In the single-Lease mode, and without
// leader election, every unit is a whole controller.
type Unit struct {
	Name       string
	Controller string
	// Shard is the unit's range; nil for a whole controller.
	Shard *shard.Shard
}

// Units expands controllers into units: those that split into n shards
// each when n > 1, the others whole. A shard unit's name says n
// (app-1-of-4): shard 1 of 4 is another range than shard 1 of 2, and so
// another Lease.
func Units(controllers []Controller, n int) []Unit {
	var out []Unit
	for _, c := range controllers {
		if n <= 1 || !c.Splits {
			out = append(out, Unit{Name: c.Name, Controller: c.Name})
			continue
		}
		shards, _ := shard.All(n) // n is validated
		for _, s := range shards {
			out = append(out, Unit{Name: fmt.Sprintf("%s-%d-of-%d", c.Name, s.Index, n), Controller: c.Name, Shard: &s})
		}
	}
	return out
}

// Names returns the units' names.
func Names(units []Unit) []string {
	out := make([]string, len(units))
	for i, u := range units {
		out[i] = u.Name
	}
	return out
}

// LeaseName is the Lease of one unit in per-controller mode:
// <leader-elect-resource-name>-<unit>.
func LeaseName(group, unit string) string {
	return group + "-" + unit
}
