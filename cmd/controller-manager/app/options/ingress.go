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
		"Domain giving the host <service>.<namespace>.<domain> for Services without an ingress/host annotation; empty leaves the rule without a host.")
}
