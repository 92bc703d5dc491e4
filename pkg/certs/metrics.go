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

package certs

import (
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	certutil "k8s.io/client-go/util/cert"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	certificateExpiry = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "controller_manager_webhook",
		Name:      "certificate_expiry_timestamp_seconds",
		Help:      "NotAfter of the webhook certificates in the Secret this replica serves from, as a Unix time; kind is serving or ca.",
	}, []string{"kind"})

	caBundleConflict = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "controller_manager_webhook",
		Name:      "cabundle_conflict",
		Help:      "1 while a webhook configuration or CRD this install should keep the caBundle of is owned by another install (see its " + CABundleOwnerAnnotation + " annotation), else 0.",
	}, []string{"kind", "name"})

	registerOnce sync.Once
)

// RegisterMetrics adds the certificate metrics to the legacy registry served
// on /metrics. Safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(certificateExpiry, caBundleConflict)
	})
}

// FollowServingExpiry keeps the serving certificate's expiry gauge on the
// certificate of files, which this replica serves but does not manage
// (--webhook-cert-dir, e.g. cert-manager's), from its first load and after
// every change, so that the expiry alert covers it too. A certificate that
// cannot be read leaves the gauge as it was.
func FollowServingExpiry(files dynamiccertificates.CertKeyContentProvider) {
	RegisterMetrics()
	expiry := servingExpiry{files}
	files.AddListener(expiry)
	expiry.Enqueue()
}

// servingExpiry records the expiry each time the files are (re)loaded.
type servingExpiry struct {
	content dynamiccertificates.CertKeyContentProvider
}

// Enqueue is called by the files' provider after every change.
func (e servingExpiry) Enqueue() {
	cert, _ := e.content.CurrentCertKeyContent()
	if parsed, err := certutil.ParseCertsPEM(cert); err == nil {
		certificateExpiry.WithLabelValues("serving").Set(float64(parsed[0].NotAfter.Unix()))
	}
}

// recordExpiry sets the expiry gauges from the Secret's data; a certificate
// that cannot be read leaves its gauge as it was.
func recordExpiry(data map[string][]byte) {
	for kind, key := range map[string]string{"serving": TLSCertKey, "ca": CACertKey} {
		if parsed, err := certutil.ParseCertsPEM(data[key]); err == nil {
			certificateExpiry.WithLabelValues(kind).Set(float64(parsed[0].NotAfter.Unix()))
		}
	}
}
