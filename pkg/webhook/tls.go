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

package webhook

import (
	"context"
	"crypto/tls"
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// ReloadingTLSConfig returns a TLS config that serves certs's current
// certificate and, until ctx is done, follows its changes: a renewed
// certificate (a file replaced on disk, a Secret rotated) is served to new
// connections without a restart. HTTP/2 first, for the API server's sake: a
// replica that shuts down, closes an idle connection or answers
// Connection: close (CloseConnections) sends a GOAWAY, and the client sends
// again, on another connection, what the replica had not taken. Over
// HTTP/1.1 a kept-alive connection closed as a request is sent on it fails
// that request with EOF, which the API server does not retry: make test's
// chaos saw it in rollouts ("conversion webhook … Post …: EOF"). Go's
// HTTP/2 server bounds what a client's stream resets can cost
// (CVE-2023-44487).
//
// The error says that no certificate could be loaded yet; the config is
// usable all the same and starts serving once certs holds one. The returned
// source answers what is served now (CertificateCheck uses it).
func ReloadingTLSConfig(ctx context.Context, certs dynamiccertificates.CertKeyContentProvider) (*tls.Config, *dynamiccertificates.DynamicServingCertificateController, error) {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	serving := dynamiccertificates.NewDynamicServingCertificateController(base, nil, certs, nil, nil)
	// The controller's worker logs every failed load as an error and retries
	// within milliseconds. Starting empty (the Secret not filled yet) is
	// expected, so the worker starts with the first content instead. The
	// starter listens before the first load, so no content is missed between.
	start := &onFirstChange{do: func() { go serving.Run(1, ctx.Done()) }}
	certs.AddListener(serving)
	certs.AddListener(start)
	err := serving.RunOnce()
	if err == nil {
		start.Enqueue()
	}
	if files, ok := certs.(dynamiccertificates.ControllerRunner); ok {
		go files.Run(ctx, 1)
	}
	return &tls.Config{GetConfigForClient: serving.GetConfigForClient}, serving, err
}

// onFirstChange is a dynamiccertificates.Listener that calls do once, at the
// first change it is told of.
type onFirstChange struct {
	once sync.Once
	do   func()
}

func (l *onFirstChange) Enqueue() { l.once.Do(l.do) }
