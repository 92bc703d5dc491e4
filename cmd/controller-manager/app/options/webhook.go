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
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
)

// WebhookOptions configure the webhook server and its certificates.
type WebhookOptions struct {
	// Enabled serves the webhooks (on every replica, leader or not).
	Enabled bool
	Address string
	Port    int

	// CertDir, when set, holds tls.crt and tls.key mounted from elsewhere
	// (cert-manager); the manager then only serves them and manages nothing.
	CertDir string

	// Otherwise the manager issues a CA and a serving certificate into the
	// Secret Namespace/SecretName for the Service's DNS names, and keeps the
	// caBundle of the configurations and CRDs below.
	Namespace         string
	SecretName        string
	ServiceName       string
	ExtraNames        []string
	CAValidity        time.Duration
	CertValidity      time.Duration
	ConfigurationName string
	ConversionCRDs    []string
	// MetricsServiceName is named by the serving certificate too; the HTTPS
	// server of probes and metrics serves it once loaded.
	MetricsServiceName string
	// CAConfigMapName publishes the CA bundle (no keys) for clients such as
	// Prometheus; empty publishes none.
	CAConfigMapName string
}

// DefaultWebhookOptions are the defaults, matching manifests/.
func DefaultWebhookOptions() WebhookOptions {
	return WebhookOptions{
		Enabled:            true,
		Port:               9443,
		SecretName:         "controller-manager-webhook-certs",
		ServiceName:        "controller-manager-webhook",
		CAValidity:         365 * 24 * time.Hour,
		CertValidity:       90 * 24 * time.Hour,
		ConfigurationName:  "ndsl-controller-manager",
		ConversionCRDs:     []string{"apps.ingress.example.com", "pipelines.distri-infer.ndsl.cn"},
		MetricsServiceName: "controller-manager-metrics",
		CAConfigMapName:    "controller-manager-ca",
	}
}

// Addr is the address the webhook server listens on.
func (o WebhookOptions) Addr() string {
	return net.JoinHostPort(o.Address, fmt.Sprint(o.Port))
}

// ServiceDNSNames are the names clients may use for the webhook Service and
// the metrics Service in namespace, as kubebuilder's certificates list them.
func (o WebhookOptions) ServiceDNSNames(namespace string) []string {
	var names []string
	for _, svc := range []string{o.ServiceName, o.MetricsServiceName} {
		if svc == "" {
			continue
		}
		names = append(names,
			svc+"."+namespace+".svc",
			svc+"."+namespace+".svc.cluster.local",
			svc+"."+namespace,
			svc)
	}
	return names
}

func bindWebhookFlags(o *WebhookOptions, fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "webhooks", o.Enabled,
		"Serve the admission and conversion webhooks, on every replica whether it leads or not. false runs controllers only; --controllers='' with --webhooks runs webhooks only.")
	fs.StringVar(&o.Address, "webhook-address", o.Address,
		"IP address the webhook server listens on; empty for all interfaces.")
	fs.IntVar(&o.Port, "webhook-port", o.Port, "Port of the webhook server (HTTPS); 0 picks a free one.")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir,
		"Directory with tls.crt and tls.key from elsewhere (cert-manager), reloaded when they change. Empty: the manager issues and rotates its own certificates in --webhook-cert-secret and keeps the caBundles.")
	fs.StringVar(&o.Namespace, "webhook-namespace", o.Namespace,
		"Namespace of the webhook Service and certificate Secret; empty: the pod's namespace, else \"default\".")
	fs.StringVar(&o.SecretName, "webhook-cert-secret", o.SecretName,
		"Secret holding the webhook CA and serving certificate, created by the first replica.")
	fs.StringVar(&o.ServiceName, "webhook-service", o.ServiceName,
		"Service the API server reaches the webhooks through; the serving certificate names it.")
	fs.StringSliceVar(&o.ExtraNames, "webhook-cert-extra-names", o.ExtraNames,
		"More DNS names or IP addresses for the serving certificate, e.g. 127.0.0.1 when the API server calls a URL.")
	fs.DurationVar(&o.CAValidity, "webhook-ca-validity", o.CAValidity,
		"Lifetime of the webhook CA; its successor joins the caBundle at half of it and takes over at two thirds.")
	fs.DurationVar(&o.CertValidity, "webhook-cert-validity", o.CertValidity,
		"Lifetime of the webhook serving certificate; it is renewed at two thirds of it.")
	fs.StringVar(&o.ConfigurationName, "webhook-configuration-name", o.ConfigurationName,
		"Name of the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration whose caBundle the manager keeps.")
	fs.StringSliceVar(&o.ConversionCRDs, "webhook-conversion-crds", o.ConversionCRDs,
		"CRDs whose conversion webhook caBundle the manager keeps (those with conversion strategy Webhook).")
	fs.StringVar(&o.MetricsServiceName, "metrics-service", o.MetricsServiceName,
		"Service in front of --http-address. The managed serving certificate names it too, and with --secure-serving and no --tls-cert-file the HTTPS server serves that certificate once loaded, so scrapers can verify it. Empty: the webhook Service only.")
	fs.StringVar(&o.CAConfigMapName, "webhook-ca-configmap", o.CAConfigMapName,
		"ConfigMap, beside the certificate Secret, where the manager publishes its CA bundle (key ca-bundle.crt, no private keys) for clients such as Prometheus. Empty publishes none.")
}

// Validate returns every problem with the webhook options.
func (o WebhookOptions) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be between 0 (any free port) and 65535, got %d", o.Port))
	}
	if o.CertDir == "" {
		if o.SecretName == "" || o.ServiceName == "" {
			errs = append(errs, errors.New("--webhook-cert-secret and --webhook-service must not be empty"))
		}
		if o.CAValidity <= 0 || o.CertValidity <= 0 {
			errs = append(errs, fmt.Errorf("--webhook-ca-validity and --webhook-cert-validity must be positive, got %s and %s", o.CAValidity, o.CertValidity))
		}
	}
	return errors.Join(errs...)
}
