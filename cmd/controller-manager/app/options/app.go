package options

import (
	"github.com/spf13/pflag"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
)

func bindAppFlags(o *appcontroller.Options, fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "concurrent-app-syncs", o.Workers,
		"Apps reconciled at once by the app controller.")
	fs.StringVar(&o.IngressDomain, "app-ingress-domain", o.IngressDomain,
		"Domain giving an App's Ingress the host <app>.<namespace>.<domain>; empty leaves the rule without a host and the App without a URL.")
	fs.StringVar(&o.IngressClass, "app-ingress-class", o.IngressClass,
		"Ingress class of the Apps' Ingresses; empty uses the cluster's default class.")
}
