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

package cleanup

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Options configures the Cleanup controller.
type Options struct {
	// Common are the options every controller has (workers, queue, retries).
	controller.Common
	// Interval between sweeps.
	Interval time.Duration
	// StalePeriod is how long an object must have been seen stale before it
	// is removed.
	StalePeriod time.Duration
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Interval: 10 * time.Minute, StalePeriod: 24 * time.Hour}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Interval <= 0 {
		return fmt.Errorf("--cleanup-interval must be positive, got %s", o.Interval)
	}
	if o.StalePeriod < 0 {
		return fmt.Errorf("--cleanup-stale-period must not be negative, got %s", o.StalePeriod)
	}
	return nil
}

// AddFlags binds the options to their flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.Interval, "cleanup-interval", o.Interval,
		"Time between sweeps of the cleanup controller; one sweep also runs at start.")
	fs.DurationVar(&o.StalePeriod, "cleanup-stale-period", o.StalePeriod,
		"How long an object must have been seen stale before it is removed. A restart of the manager starts the count again.")
	fs.BoolVar(&o.DryRun, "cleanup-dry-run", o.DryRun,
		"Report what would be removed (log, event, metric) and remove nothing.")
}
