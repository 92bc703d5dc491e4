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
	"bytes"
	"crypto/tls"
	"sync"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// ServingContent is a dynamiccertificates.CertKeyContentProvider holding the
// serving certificate read from the Secret; the webhook server reloads from
// it without a restart.
type ServingContent struct {
	name string

	mu        sync.Mutex
	cert, key []byte
	listeners []dynamiccertificates.Listener
}

var _ dynamiccertificates.CertKeyContentProvider = &ServingContent{}

// NewServingContent returns an empty provider; name says where its content
// comes from, in logs.
func NewServingContent(name string) *ServingContent {
	return &ServingContent{name: name}
}

// Name says where the certificate comes from.
func (c *ServingContent) Name() string { return c.name }

// AddListener registers a listener told of every change.
func (c *ServingContent) AddListener(l dynamiccertificates.Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}

// CurrentCertKeyContent returns the certificate and key in PEM.
func (c *ServingContent) CurrentCertKeyContent() ([]byte, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, c.key
}

// Set replaces the content and tells the listeners, if it changed and the
// pair is usable: a damaged Secret never replaces a working certificate.
// It reports whether the content changed.
func (c *ServingContent) Set(cert, key []byte) bool {
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return false
	}
	c.mu.Lock()
	if bytes.Equal(c.cert, cert) && bytes.Equal(c.key, key) {
		c.mu.Unlock()
		return false
	}
	c.cert, c.key = bytes.Clone(cert), bytes.Clone(key)
	listeners := append([]dynamiccertificates.Listener(nil), c.listeners...)
	c.mu.Unlock()
	for _, l := range listeners {
		l.Enqueue()
	}
	return true
}
