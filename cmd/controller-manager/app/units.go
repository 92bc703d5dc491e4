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

package app

import (
	"fmt"

	"github.com/ndsl/controller-manager/pkg/shard"
)

// unit is what one Lease covers with a Lease per controller: a controller,
// or with --shards one shard of a controller that can be split. Its
// descriptor's Name is the unit's (<controller> or <controller>-<i>-of-<n>), the
// name of its Lease suffix, queue, metrics, clients and status entry.
type unit struct {
	ControllerDescriptor
	controller string
	// shard is the unit's range; nil for a whole controller.
	shard *shard.Shard
}

// units expands the enabled controllers into units: those that can be
// split into n shards each when n > 1, the others whole. A shard unit's
// name says n (app-1-of-4): shard 1 of 4 is another range than shard 1 of
// 2, and so another Lease.
func units(enabled []ControllerDescriptor, n int) []unit {
	var out []unit
	for _, d := range enabled {
		if n <= 1 || d.ShardKeys == nil {
			out = append(out, unit{ControllerDescriptor: d, controller: d.Name})
			continue
		}
		shards, _ := shard.All(n) // n is validated
		for _, s := range shards {
			u := unit{ControllerDescriptor: d, controller: d.Name, shard: &s}
			u.Name = fmt.Sprintf("%s-%d-of-%d", d.Name, s.Index, n)
			out = append(out, u)
		}
	}
	return out
}

// descriptors returns the units' descriptors, named after the units.
func descriptors(us []unit) []ControllerDescriptor {
	out := make([]ControllerDescriptor, len(us))
	for i, u := range us {
		out[i] = u.ControllerDescriptor
	}
	return out
}
