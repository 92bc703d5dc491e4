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
	"context"
	"fmt"
	"net"
	"path/filepath"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// webhooks is the running webhook server and what keeps its certificate.
type webhooks struct {
	server *webhook.Server
	addr   net.Addr
	// runCerts keeps the serving certificate current until ctx is done;
	// nil for mounted files, which the server follows itself.
	runCerts func(ctx context.Context)
	// managed is the certificate the manager issues itself; nil when it is
	// mounted from elsewhere (--webhook-cert-dir).
	managed *certs.ServingContent
	// trusted fails /readyz until the caBundles trust managed; nil with
	// mounted files (cert-manager's cainjector writes those caBundles).
	trusted healthz.HealthChecker
}

// startWebhooks registers every webhook, chooses where the serving
// certificate comes from and opens the webhook listener. The certificate
// source starts with Run; until it has a certificate, /readyz fails.
func (m *Manager) startWebhooks(ctx context.Context) (*webhooks, error) {
	o := m.opts.Webhook
	server := webhook.NewServer()
	webhook.RegisterMetrics()
	if err := registerWebhooks(server, WebhookContext{Options: m.opts, KubeConfig: m.clientConfig("webhooks"), Context: ctx,
		pipelines: &storedPipelineList{}}, append(webhookRegistrations(), m.extraWebhooks...)); err != nil {
		return nil, err
	}

	w := &webhooks{server: server}
	var content dynamiccertificates.CertKeyContentProvider
	if o.CertDir != "" {
		files, err := dynamiccertificates.NewDynamicServingContentFromFiles("webhook-serving",
			filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("loading the webhook certificate from --webhook-cert-dir: %w", err)
		}
		content = files // Serve follows the files (webhook.ReloadingTLSConfig), and so does the expiry metric
		certs.FollowServingExpiry(files)
	} else {
		cm, err := m.newCertManager()
		if err != nil {
			return nil, err
		}
		content = cm.ServingCertificate()
		w.managed = cm.ServingCertificate()
		w.trusted = cm.TrustedCheck()
		w.runCerts = cm.Run
	}

	addr, err := server.Serve(ctx, o.Addr(), content)
	if err != nil {
		return nil, err
	}
	w.addr = addr
	return w, nil
}

// newCertManager builds the manager of the certificate Secret and of the
// caBundles, for the Service's names in the configured namespace.
func (m *Manager) newCertManager() (*certs.Manager, error) {
	o := m.opts.Webhook
	namespace := leaseNamespace(o.Namespace)
	cfg := m.clientConfig("webhook-certificates")
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the webhook certificates' client: %w", err)
	}
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the webhook certificates' CRD client: %w", err)
	}
	var targets certs.Targets
	if o.ConfigurationName != "" {
		targets.MutatingWebhookConfigurations = []string{o.ConfigurationName}
		targets.ValidatingWebhookConfigurations = []string{o.ConfigurationName}
	}
	targets.CRDs = o.ConversionCRDs
	// The replica holding the Lease <--leader-elect-resource-name>-certs
	// is the only writer; without leader election every replica writes.
	var writer *certs.WriterElection
	if le := m.opts.LeaderElection; le.LeaderElect {
		if writer, err = certs.NewWriterElection(kube, leaseNamespace(le.ResourceNamespace), le.ResourceName+"-certs",
			le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration); err != nil {
			return nil, err
		}
	}
	return certs.NewManager(kube, crds, certs.Options{
		Writer:     writer,
		Namespace:  namespace,
		SecretName: o.SecretName,
		Policy: certs.Policy{
			Names:        append(o.ServiceDNSNames(namespace), o.ExtraNames...),
			CAValidity:   o.CAValidity,
			CertValidity: o.CertValidity,
		},
		Targets:     targets,
		CAConfigMap: o.CAConfigMapName,
	})
}

// WebhookAddr is the address the webhook server listens on, nil when off.
func (m *Manager) WebhookAddr() net.Addr {
	if m.webhooks == nil {
		return nil
	}
	return m.webhooks.addr
}

// runWebhookCertificates keeps the webhook certificate current, on every
// replica, until ctx is done.
func (m *Manager) runWebhookCertificates(ctx context.Context) {
	if m.webhooks == nil || m.webhooks.runCerts == nil {
		return
	}
	go m.webhooks.runCerts(klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), "webhook-certificates")))
}
