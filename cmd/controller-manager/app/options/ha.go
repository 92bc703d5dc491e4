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

package options

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Standby modes: what a replica that does not lead runs.
const (
	// StandbyWarm builds the controllers, starts their informers and event
	// handlers and syncs the caches; only the workers wait for the Lease.
	StandbyWarm = "warm"
	// StandbyCold starts nothing until the Lease is won, as
	// kube-controller-manager does.
	StandbyCold = "cold"
)

// HAOptions say how replicas share the work under leader election.
type HAOptions struct {
	// Standby is StandbyWarm or StandbyCold.
	Standby string
	// PerController runs each enabled controller under its own Lease,
	// <leader-elect-resource-name>-<controller>, so that the replicas share
	// the controllers (pkg/membership).
	PerController bool
	// Shards splits each shardable controller (App, Ingress, Pipeline) into
	// this many shards, each under its own Lease; 1 does not split.
	Shards int
}

// DefaultHAOptions: warm standbys, one Lease for all controllers.
func DefaultHAOptions() HAOptions {
	return HAOptions{Standby: StandbyWarm, Shards: 1}
}

func bindHAFlags(o *HAOptions, fs *pflag.FlagSet) {
	fs.StringVar(&o.Standby, "standby", o.Standby,
		"What a replica runs while it does not lead: 'warm' builds the controllers and syncs their caches, so a takeover starts working at once (each standby holds a full cache and one watch per resource); 'cold' starts nothing until it leads, for replicas short of memory.")
	fs.BoolVar(&o.PerController, "leader-elect-per-controller", o.PerController,
		"Run each enabled controller under its own Lease, <leader-elect-resource-name>-<controller>, so that replicas share the controllers evenly: each replica keeps a member Lease, <leader-elect-resource-name>-member-<hash>, and leads the controllers assigned to it. Requires --standby=warm. Replicas with another Lease layout (this flag or --shards changed by a rolling update) acquire nothing until the last replica of the leading layout is gone.")
	fs.IntVar(&o.Shards, "shards", o.Shards,
		"Split the App, Ingress and Pipeline controllers into this many shards by hash range (Apps and the Ingress controller's Services by namespace, Pipelines by uid, children with their owner), each under its own Lease, <leader-elect-resource-name>-<controller>-<i>-of-<n>, so that replicas share one controller's objects and each caches only the shards it leads. Replicas with another value acquire nothing until the last replica of the leading value is gone. Needs --leader-elect-per-controller; 1 does not split.")
}

// maxShards bounds --shards: each shard is a Lease, renewed every retry period.
const maxShards = 64

// Validate returns the problems with the HA options.
func (o HAOptions) Validate() error {
	switch o.Standby {
	case StandbyWarm, StandbyCold:
	default:
		return fmt.Errorf("--standby must be %q or %q, got %q", StandbyWarm, StandbyCold, o.Standby)
	}
	if o.PerController && o.Standby != StandbyWarm {
		return fmt.Errorf("--leader-elect-per-controller needs --standby=%s: the controllers share their informers, so every replica starts them all", StandbyWarm)
	}
	if o.Shards < 1 || o.Shards > maxShards {
		return fmt.Errorf("--shards must be between 1 and %d, got %d", maxShards, o.Shards)
	}
	if o.Shards > 1 && !o.PerController {
		return fmt.Errorf("--shards=%d needs --leader-elect-per-controller: each shard runs under its own Lease", o.Shards)
	}
	return nil
}
