package framework

import (
	"os"
	"path/filepath"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

// WriteServingCertificate writes a self-signed serving certificate for host
// as tls.crt and tls.key into a temporary directory, the layout
// --webhook-cert-dir reads, and returns the directory.
func WriteServingCertificate(t testing.TB, host string) string {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
