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
