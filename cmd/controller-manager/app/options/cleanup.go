package options

import (
	"github.com/spf13/pflag"

	"github.com/ndsl/controller-manager/controllers/cleanup"
)

func bindCleanupFlags(o *cleanup.Options, fs *pflag.FlagSet) {
	fs.DurationVar(&o.Interval, "cleanup-interval", o.Interval,
		"Time between sweeps of the cleanup controller; one sweep also runs at start.")
	fs.DurationVar(&o.StalePeriod, "cleanup-stale-period", o.StalePeriod,
		"How long an object must have been seen stale before it is removed. A restart of the manager starts the count again.")
	fs.BoolVar(&o.DryRun, "cleanup-dry-run", o.DryRun,
		"Report what would be removed (log, event, metric) and remove nothing.")
}
