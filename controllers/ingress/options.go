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

package ingress

import (
	"fmt"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Options configures the Ingress controller. The manager binds them to
// flags; tests set them directly.
type Options struct {
	// Name is what the controller's queue and metrics go by: the shard
	// unit's when the manager splits the controller, else ControllerName.
	Name string
	// Workers is the number of concurrent reconciles.
	Workers int
	// Queue is the order of the controller's queue; the manager sets it
	// from --controller-queue. Empty is the priority queue.
	Queue controller.QueueKind
	// DefaultClass is the ingress class used when a Service has no
	// ingress/class annotation; empty leaves the cluster default in charge.
	DefaultClass string
	// DefaultDomain gives the host <service>.<namespace>.<domain> when a
	// Service has no ingress/host annotation; empty leaves the rule hostless.
	DefaultDomain string
	// AllowedHosts bounds the hosts of the Ingresses (AllowedHost);
	// empty allows every host but wildcards.
	AllowedHosts []string
	// MaxRetries bounds a Service's consecutive failed reconciles before its key
	// is dropped until an event; 0 is controller.DefaultMaxRetries. Not a
	// flag: tests lower it to reach the bound quickly.
	MaxRetries int
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Workers: 5}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--concurrent-ingress-syncs must be at least 1, got %d", o.Workers)
	}
	return nil
}
