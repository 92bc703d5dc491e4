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
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Options configures the App controller. The manager binds them to flags;
// tests set them directly.
type Options struct {
	// Name is what the controller's queue and metrics go by: the shard
	// unit's when the manager splits the controller, else ControllerName.
	Name string
	// Workers is the number of Apps reconciled at once.
	Workers int
	// Queue is the order of the controller's queue; the manager sets it
	// from --controller-queue. Empty is the priority queue.
	Queue controller.QueueKind
	// IngressDomain gives an App's Ingress the host
	// <app>.<namespace>.<domain>; empty refuses every App an Ingress (one
	// without a host would catch every request of its class).
	IngressDomain string
	// IngressClass is the class of the Apps' Ingresses; empty leaves the
	// choice to the cluster's default IngressClass.
	IngressClass string
	// MaxRetries bounds an App's consecutive failed reconciles before its key
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
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-app-syncs must be at least 1, got %d", o.Workers))
	}
	if domain := strings.Trim(o.IngressDomain, "."); domain != "" {
		if msgs := validation.IsDNS1123Subdomain(domain); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--app-ingress-domain %q: %s", o.IngressDomain, strings.Join(msgs, "; ")))
		}
	}
	if o.IngressClass != "" {
		if msgs := validation.IsDNS1123Subdomain(o.IngressClass); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--app-ingress-class %q: %s", o.IngressClass, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}
