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
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
)

// LeaseLostGrace bounds how long a replica that lost a Lease waits for
// the unit's cancelled workers before it goes on.
const LeaseLostGrace = 2 * time.Second

// ErrLeaderElectionLost is returned by Run when the single Lease was lost
// while leading; the process must exit non-zero and let a fresh start
// compete again.
var ErrLeaderElectionLost = errors.New("leader election lost")

// Config is what Run needs.
type Config struct {
	// LeaderElection is the --leader-elect-* flags.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Namespace is the Leases' namespace.
	Namespace string
	// PerController runs a Lease per unit, shared among the replicas by
	// membership; else one Lease covers every controller.
	PerController bool
	// Shards splits each controller that splits into that many units
	// (per-controller mode).
	Shards int
	// WarmStandby builds the controllers and syncs their caches before
	// the single Lease is acquired; else once it is (single-Lease mode).
	WarmStandby bool
	// Enabled are the controllers this replica runs; Known every
	// controller of the binary, whose Leases other replicas of this
	// layout may hold.
	Enabled, Known []Controller
	// ClientConfig is for the Leases and the leader election Events.
	ClientConfig *rest.Config
	// Scheme resolves the kinds leader election Events are recorded on.
	Scheme *runtime.Scheme
	// Controllers builds and runs the units.
	Controllers Controllers
	// WatchDog is the single Lease's health check, UnitWatchDogs each
	// unit's in per-controller mode; nil: none.
	WatchDog      *leaderelection.HealthzAdaptor
	UnitWatchDogs map[string]*leaderelection.HealthzAdaptor
	// WrapLock, when set, wraps each Lease lock (tests: fault injection).
	WrapLock func(resourcelock.Interface) resourcelock.Interface
}

// Run runs the enabled controllers under leader election until ctx is
// done: under the single Lease, or a Lease per unit. It returns nil after a
// clean shutdown (every unit drained, then its Lease released) and
// ErrLeaderElectionLost when the single Lease was lost while leading.
func Run(ctx context.Context, cfg Config) error {
	if cfg.PerController {
		return runPerUnit(ctx, cfg)
	}
	return runSingle(ctx, cfg)
}

// wrap applies the tests' lock wrapper, if any.
func (cfg Config) wrap(lock resourcelock.Interface) resourcelock.Interface {
	if cfg.WrapLock != nil {
		return cfg.WrapLock(lock)
	}
	return lock
}
