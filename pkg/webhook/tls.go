package webhook

import (
	"context"
	"crypto/tls"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// ReloadingTLSConfig returns a TLS config that serves certs's current
// certificate and, until ctx is done, follows its changes: a renewed
// certificate (a file replaced on disk, a Secret rotated) is served to new
// connections without a restart. HTTP/1.1 only: nothing the manager serves
// needs more, and HTTP/2's stream handling has been the source of
// denial-of-service bugs.
//
// The error says that no certificate could be loaded yet; the config is
// usable all the same and starts serving once certs holds one. The returned
// source answers what is served now (CertificateCheck uses it).
func ReloadingTLSConfig(ctx context.Context, certs dynamiccertificates.CertKeyContentProvider) (*tls.Config, *dynamiccertificates.DynamicServingCertificateController, error) {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	serving := dynamiccertificates.NewDynamicServingCertificateController(base, nil, certs, nil, nil)
	certs.AddListener(serving)
	err := serving.RunOnce()
	if files, ok := certs.(dynamiccertificates.ControllerRunner); ok {
		go files.Run(ctx, 1)
	}
	go serving.Run(1, ctx.Done())
	return &tls.Config{GetConfigForClient: serving.GetConfigForClient}, serving, err
}
