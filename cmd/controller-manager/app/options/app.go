package options

import (
	"github.com/spf13/pflag"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
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

func bindAppAdmissionFlags(o *appcontroller.AdmissionOptions, fs *pflag.FlagSet) {
	fs.BoolVar(&o.InvertEnableIngress, "app-invert-enable-ingress", o.InvertEnableIngress,
		"The App defaulting webhook sets enable_ingress to the inverse of the value an App is created with through v1beta1, as the design notes specify, "+
			"once, recording the requested value in the annotation "+appv1beta1.EnableIngressRequestedAnnotation+". false leaves enable_ingress as written.")
}
