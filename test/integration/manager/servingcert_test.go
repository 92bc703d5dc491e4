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

package manager

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// The serving certificate of --tls-cert-file is reloaded when the files
// change (a renewed Secret), without a restart.
func TestServingCertificateReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCert := func(host string) {
		t.Helper()
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Key first, then the certificate: a reader may see a mismatched pair
		// in between, which must be retried, not served.
		for path, data := range map[string][]byte{keyFile: keyPEM, certFile: certPEM} {
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeCert("first.example")

	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		o.Generic.Controllers = []string{ingress.ControllerName}
		o.Generic.SecureServing = true
		o.Generic.TLSCertFile, o.Generic.TLSKeyFile = certFile, keyFile
	})
	served := func(context.Context) (string, error) {
		conn, err := tls.Dial("tcp", m.HTTPAddr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].DNSNames[0], nil
	}
	if name, err := served(context.Background()); err != nil || name != "first.example" {
		t.Fatalf("served certificate %q (%v), want first.example", name, err)
	}

	writeCert("second.example")
	framework.Eventually(t, 30*time.Second, "the renewed certificate to be served", func(ctx context.Context) (bool, error) {
		name, err := served(ctx)
		return name == "second.example", err
	})
	if status, _, err := m.Get("/healthz"); err != nil || status != 200 {
		t.Errorf("/healthz after the reload = %d (%v), want 200", status, err)
	}
}
