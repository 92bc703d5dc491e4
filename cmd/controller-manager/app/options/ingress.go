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
	"github.com/spf13/pflag"

	"github.com/ndsl/controller-manager/controllers/ingress"
)

func bindIngressFlags(o *ingress.Options, fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "concurrent-ingress-syncs", o.Workers,
		"Services reconciled at once by the ingress controller.")
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
