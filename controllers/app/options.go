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

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Options configures the App controller. The manager binds them to flags;
// tests set them directly.
type Options struct {
	// Common are the options every controller has (workers, queue, retries).
	controller.Common
	// IngressDomain gives an App's Ingress the host
	// <app>.<namespace>.<domain>; empty refuses every App an Ingress (one
	// without a host would catch every request of its class).
	IngressDomain string
	// IngressClass is the class of the Apps' Ingresses; empty leaves the
	// choice to the cluster's default IngressClass.
	IngressClass string
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Common: controller.Common{Workers: 5}}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
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

// AddFlags binds the options to their flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.IngressDomain, "app-ingress-domain", o.IngressDomain,
		"Domain giving an App's Ingress the host <app>.<namespace>.<domain>; empty refuses every App an Ingress "+
			"(one without a host would catch every request of its class): such an App reports Ready=False and Degraded=True, reason IngressHostRequired.")
	fs.StringVar(&o.IngressClass, "app-ingress-class", o.IngressClass,
		"Ingress class of the Apps' Ingresses; empty uses the cluster's default class.")
}
