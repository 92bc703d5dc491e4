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
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Options configures the Ingress controller. The manager binds them to
// flags; tests set them directly.
type Options struct {
	// Common are the options every controller has (workers, queue, retries).
	controller.Common
	// DefaultClass is the ingress class used when a Service has no
	// ingress/class annotation; empty leaves the cluster default in charge.
	DefaultClass string
	// DefaultDomain gives the host <service>.<namespace>.<domain> when a
	// Service has no ingress/host annotation; empty leaves such a Service
	// without an Ingress.
	DefaultDomain string
	// AllowedHosts bounds the hosts of the Ingresses (--ingress-allowed-hosts):
	// an entry D allows D and every host below it, an entry *.D every host
	// below D, wildcard hosts (*.X) included. Empty allows every host but
	// wildcards.
	AllowedHosts []string
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Common: controller.Common{Workers: 5}}
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	var bad []string
	for _, entry := range o.AllowedHosts {
		if len(validation.IsDNS1123Subdomain(strings.TrimPrefix(entry, "*."))) > 0 {
			bad = append(bad, strconv.Quote(entry))
		}
	}
	if len(bad) > 0 {
		errs = append(errs, fmt.Errorf("--ingress-allowed-hosts: %s: each entry is a lowercase DNS name (apps.example.com: it and the hosts below it), "+
			"or one after \"*.\" (*.apps.example.com: the hosts below it, wildcard hosts included)", strings.Join(bad, ", ")))
	}
	return errors.Join(errs...)
}

// allowHost says why host is not allowed under allowed, the entries of
// --ingress-allowed-hosts, or nil when it is. Suffixes match on whole
// labels: apps.example.com does not allow evilapps.example.com.
func allowHost(host string, allowed []string) error {
	host = strings.ToLower(host)
	base, wildcard := strings.CutPrefix(host, "*.")
	if len(allowed) == 0 {
		if wildcard {
			return fmt.Errorf("wildcard host %q is not allowed: --ingress-allowed-hosts is empty, which allows every host but wildcards", host)
		}
		return nil
	}
	below := func(name, domain string) bool { return strings.HasSuffix(name, "."+domain) }
	for _, entry := range allowed {
		domain, wildEntry := strings.CutPrefix(entry, "*.")
		switch {
		case wildcard && wildEntry && (base == domain || below(base, domain)):
			return nil
		case !wildcard && wildEntry && below(host, domain):
			return nil
		case !wildcard && !wildEntry && (host == domain || below(host, domain)):
			return nil
		}
	}
	if wildcard {
		return fmt.Errorf("wildcard host %q is not allowed: it needs an entry *.<domain> in --ingress-allowed-hosts (%s)", host, strings.Join(allowed, ", "))
	}
	return fmt.Errorf("host %q is not allowed by --ingress-allowed-hosts (%s)", host, strings.Join(allowed, ", "))
}

// AddFlags binds the options to their flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DefaultClass, "ingress-default-class", o.DefaultClass,
		"Ingress class for Services without an ingress/class annotation; empty uses the cluster's default class.")
	fs.StringVar(&o.DefaultDomain, "ingress-default-domain", o.DefaultDomain,
		"Domain giving the host <service>.<namespace>.<domain> for Services without an ingress/host annotation; empty refuses such a Service an Ingress "+
			"(one without a host would catch every request of its class).")
	fs.StringSliceVar(&o.AllowedHosts, "ingress-allowed-hosts", o.AllowedHosts,
		"Hosts the Ingresses may serve, a comma-separated list of suffixes: apps.example.com allows it and every host below it "+
			"(shop.apps.example.com, not evilapps.example.com); *.apps.example.com allows every host below it, wildcard hosts "+
			"(*.apps.example.com, *.team.apps.example.com) included. Empty allows every host but wildcards. "+
			"A Service outside gets no Ingress and a Warning event (IngressHostNotAllowed).")
}
