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
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	componentbaseconfig "k8s.io/component-base/config"
)

// Units name shard units after their count (shard 1 of 4 is another range,
// and Lease, than shard 1 of 2); a controller that does not split stays
// whole.
func TestUnits(t *testing.T) {
	cs := []Controller{{Name: "app", Splits: true}, {Name: "cleanup"}}
	if got, want := Names(Units(cs, 1)), []string{"app", "cleanup"}; !slices.Equal(got, want) {
		t.Errorf("Units(1) = %v, want %v", got, want)
	}
	us := Units(cs, 2)
	if got, want := Names(us), []string{"app-0-of-2", "app-1-of-2", "cleanup"}; !slices.Equal(got, want) {
		t.Errorf("Units(2) = %v, want %v", got, want)
	}
	if us[1].Controller != "app" || us[1].Shard == nil || us[1].Shard.Index != 1 || us[2].Shard != nil {
		t.Errorf("units %+v: want app's shard 1 and cleanup whole", us)
	}
}

// A replica recognises the Leases its own layout names, for every known
// controller, and no other layout's.
func TestNamesOwnLease(t *testing.T) {
	cfg := Config{LeaderElection: componentbaseconfig.LeaderElectionConfiguration{ResourceName: "cm"},
		Known: []Controller{{Name: "app", Splits: true}, {Name: "cleanup"}}}
	single := cfg
	for name, want := range map[string]bool{"cm": true, "cm-app": false} {
		if got := single.namesOwnLease(name); got != want {
			t.Errorf("single: namesOwnLease(%s) = %t, want %t", name, got, want)
		}
	}
	sharded := cfg
	sharded.PerController, sharded.Shards = true, 2
	for name, want := range map[string]bool{"cm": false, "cm-app": false, "cm-app-1-of-2": true, "cm-app-1-of-4": false, "cm-cleanup": true} {
		if got := sharded.namesOwnLease(name); got != want {
			t.Errorf("2 shards: namesOwnLease(%s) = %t, want %t", name, got, want)
		}
	}
}

// The Lease client's budget covers a renewal of every Lease per retry
// period, half as much again, and leaves a larger limit or none alone.
func TestLeaseBudget(t *testing.T) {
	cfg := &rest.Config{QPS: 20, Burst: 30}
	leaseBudget(cfg, 64, 2*time.Second)
	if cfg.QPS != 48.75 || cfg.Burst != 65 {
		t.Errorf("64 Leases, retry 2 s: QPS %v burst %d, want 48.75 and 65", cfg.QPS, cfg.Burst)
	}
	cfg = &rest.Config{QPS: 20, Burst: 30}
	leaseBudget(cfg, 1, 2*time.Second)
	if cfg.QPS != 20 || cfg.Burst != 30 {
		t.Errorf("1 Lease: QPS %v burst %d, want the flags' 20 and 30", cfg.QPS, cfg.Burst)
	}
	cfg = &rest.Config{QPS: -1}
	leaseBudget(cfg, 64, 2*time.Second)
	if cfg.QPS != -1 {
		t.Errorf("no client-side limit became %v", cfg.QPS)
	}
}
