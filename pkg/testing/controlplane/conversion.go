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

package controlplane

import (
	"context"
	"net"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	appconversion "github.com/ndsl/controller-manager/apis/app/conversion"
	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

var (
	conversionOnce sync.Once
	conversionURL  string
	conversionCA   []byte
	conversionErr  error
)

// ServeConversion serves the CRDs' conversion webhooks, with the manager's
// converters, from this process on a loopback port until it exits, and
// returns the server's URL and the CA bundle that verifies it. It starts
// the server once per process.
func ServeConversion() (string, []byte, error) {
	conversionOnce.Do(func() {
		certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
		if err != nil {
			conversionErr = err
			return
		}
		certs, err := dynamiccertificates.NewStaticCertKeyContent("conversion", certPEM, keyPEM)
		if err != nil {
			conversionErr = err
			return
		}
		s := webhook.NewServer()
		s.HandleConversion(webhook.PathConvertApps, "app-conversion", appconversion.Converter{})
		s.HandleConversion(webhook.PathConvertPipelines, "pipeline-conversion", pipelineconversion.Converter{})
		addr, err := s.Serve(context.Background(), "127.0.0.1:0", certs)
		if err != nil {
			conversionErr = err
			return
		}
		// The certificate is its own CA.
		conversionURL, conversionCA = "https://"+addr.String(), certPEM
	})
	return conversionURL, conversionCA, conversionErr
}

// WithConversion returns copies of crds that serve every version and
// convert between them through the webhooks at url (ServeConversion's), as
// manifests/default does through the manager's Service.
func WithConversion(crds []*apiextensionsv1.CustomResourceDefinition, url string, caBundle []byte) []*apiextensionsv1.CustomResourceDefinition {
	out := make([]*apiextensionsv1.CustomResourceDefinition, len(crds))
	for i, crd := range crds {
		crd = crd.DeepCopy()
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url + "/convert/" + crd.Spec.Names.Plural), CABundle: caBundle},
				ConversionReviewVersions: []string{"v1"},
			},
		}
		for j := range crd.Spec.Versions {
			crd.Spec.Versions[j].Served = true
		}
		out[i] = crd
	}
	return out
}
