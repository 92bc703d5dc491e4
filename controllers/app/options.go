package app

import "fmt"

// Options configures the App controller. The manager binds them to flags;
// tests set them directly.
type Options struct {
	// Workers is the number of Apps reconciled at once.
	Workers int
	// IngressDomain gives an App's Ingress the host
	// <app>.<namespace>.<domain>; empty leaves the rule without a host (and
	// the App without a URL).
	IngressDomain string
	// IngressClass is the class of the Apps' Ingresses; empty leaves the
	// choice to the cluster's default IngressClass.
	IngressClass string
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Workers: 5}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--concurrent-app-syncs must be at least 1, got %d", o.Workers)
	}
	return nil
}
