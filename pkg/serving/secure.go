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

package serving

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ndsl/controller-manager/pkg/delegatedauth"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// authWebhookBackoff retries TokenReviews and SubjectAccessReviews that
// failed to reach the API server, as kube-apiserver's delegated auth does.
var authWebhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// WithDelegatedAuth protects every path but open (the probes) as
// kube-controller-manager's secure serving does: the request's bearer token
// must pass a TokenReview (else 401) and its user must be allowed the HTTP
// verb on the non-resource URL by a SubjectAccessReview (else 403). Both
// answers are cached briefly, so a scrape every few seconds costs the API
// server little.
func WithDelegatedAuth(h http.Handler, cfg *rest.Config, open []string) (http.Handler, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the client for delegated authentication: %w", err)
	}
	return delegatedauth.New(h, client, delegatedauth.Options{
		Open:             open,
		Timeout:          10 * time.Second,
		Backoff:          authWebhookBackoff,
		TokenTTL:         time.Minute,
		RejectedTokenTTL: 10 * time.Second,
		AllowTTL:         10 * time.Second,
		DenyTTL:          10 * time.Second,
	}), nil
}

// Certificate is the certificate of certFile and keyFile (--tls-cert-file
// and --tls-private-key-file), or, when none is given, a self-signed one
// made in memory (clients such as Prometheus in a cluster then skip
// verification, as they do for kube-controller-manager).
func Certificate(certFile, keyFile string) (dynamiccertificates.CertKeyContentProvider, error) {
	if certFile != "" {
		certs, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading --tls-cert-file/--tls-private-key-file: %w", err)
		}
		return certs, nil
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("controller-manager", nil, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("generating a self-signed serving certificate: %w", err)
	}
	return dynamiccertificates.NewStaticCertKeyContent("self-signed", certPEM, keyPEM)
}

// TLSConfig serves certs and follows its changes until ctx is done (see
// webhook.ReloadingTLSConfig); unlike the webhooks, probes and metrics need
// a certificate from the start.
func TLSConfig(ctx context.Context, certs dynamiccertificates.CertKeyContentProvider) (*tls.Config, error) {
	cfg, _, err := webhook.ReloadingTLSConfig(ctx, certs)
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	return cfg, nil
}

// WithFallback is primary's certificate, or fallback's while primary has
// none: the manager's own certificate for probes and metrics, once the
// Secret is read, and a self-signed one before (the kubelet's HTTPS probes
// must get an answer either way).
type WithFallback struct {
	Primary, Fallback dynamiccertificates.CertKeyContentProvider
}

// Name names both.
func (c *WithFallback) Name() string { return c.Primary.Name() + ", else " + c.Fallback.Name() }

// AddListener follows the primary's changes.
func (c *WithFallback) AddListener(l dynamiccertificates.Listener) { c.Primary.AddListener(l) }

// CurrentCertKeyContent is the primary's, once it has one.
func (c *WithFallback) CurrentCertKeyContent() ([]byte, []byte) {
	if cert, key := c.Primary.CurrentCertKeyContent(); len(cert) > 0 && len(key) > 0 {
		return cert, key
	}
	return c.Fallback.CurrentCertKeyContent()
}
