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

package layout

import (
	"fmt"
	"strings"

	"github.com/ndsl/controller-manager/pkg/membership"
)

const (
	// Label states the layout a Lease was written under: on every unit
	// Lease, every member Lease and the group's fence.
	Label = "manager.ndsl.cn/layout"
	// GroupLabel names the group (the leader election resource name) of a
	// unit Lease; member Leases carry membership.GroupLabel.
	GroupLabel = "manager.ndsl.cn/lease-of"

	// Single is one Lease for every controller.
	Single = "single"
	// PerController is a Lease per controller.
	PerController = "per-controller"
	// LegacyShards is the layout of shard Leases written before layouts
	// were stated, <group>-<controller>-<i>: their count and key version
	// are unknown, so they are another layout than any of today's.
	LegacyShards = "shards-before-layouts"
)

// Of names a layout: the mode, and with shards their count and the
// version of the keys that place objects in them (pkg/shard.KeyVersion).
func Of(perController bool, shards, keyVersion int) string {
	switch {
	case !perController:
		return Single
	case shards <= 1:
		return PerController
	default:
		return fmt.Sprintf("%d-shards.keys-v%d", shards, keyVersion)
	}
}

// FenceName is the name of the group's fence Lease.
func FenceName(group string) string { return group + "-layout" }

// Labels are the labels of a unit Lease of group written under layout.
func Labels(group, layout string) map[string]string {
	return map[string]string{GroupLabel: membership.GroupLabelValue(group), Label: layout}
}

// LegacyNames returns the classifier of Leases that state no layout,
// written before layouts were: by their names, <group> (Single),
// <group>-<controller> (PerController) and <group>-<controller>-<i>
// (LegacyShards), for the controllers named. Other names are not the
// group's.
func LegacyNames(group string, controllers []string) func(name string) (string, bool) {
	return func(name string) (string, bool) {
		if name == group {
			return Single, true
		}
		rest, ok := strings.CutPrefix(name, group+"-")
		if !ok {
			return "", false
		}
		for _, c := range controllers {
			if rest == c {
				return PerController, true
			}
			if i, ok := strings.CutPrefix(rest, c+"-"); ok && i != "" && strings.Trim(i, "0123456789") == "" {
				return LegacyShards, true
			}
		}
		return "", false
	}
}
