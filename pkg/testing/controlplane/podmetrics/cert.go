package podmetrics

import (
	"crypto/tls"
	"fmt"
	"net"

	certutil "k8s.io/client-go/util/cert"
)

// selfSignedCertificate is a serving certificate for localhost and
// 127.0.0.1; the APIService skips its verification.
func selfSignedCertificate() (tls.Certificate, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the metrics stand-in's certificate: %w", err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
