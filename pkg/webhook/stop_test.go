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
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2/ktesting"
)

// appCreateReview is an AdmissionReview of an App's create.
var appCreateReview = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"ingress.example.com","version":"v1","kind":"App"},"resource":{"group":"ingress.example.com","version":"v1","resource":"apps"},"operation":"CREATE","userInfo":{},"object":{}}}`)

// allowingServer serves, until ctx ends, a webhook on /validate/apps that
// allows everything, and returns it with its address.
func allowingServer(ctx context.Context, t *testing.T, certs *settableCerts) (*Server, string) {
	t.Helper()
	s := NewServer()
	s.HandleAdmission("/validate/apps", "test-allow", AdmissionFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return Allowed()
	}))
	addr, err := s.Serve(ctx, "127.0.0.1:0", certs)
	if err != nil {
		t.Fatal(err)
	}
	return s, addr.String()
}

// postReview posts appCreateReview to url with client and says why it
// failed, or nil.
func postReview(client *http.Client, url string) error {
	res, err := client.Post(url, "application/json", bytes.NewReader(appCreateReview))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", res.Status)
	}
	return nil
}

// After its serving context ends, the server still serves the connections
// that come (kube-proxy may send them after the lame duck, and the API
// server over HTTP/1.1 does not retry a refused one), closing each after its
// answer, and stops once they have stopped coming for acceptQuiet.
func TestNewConnectionsAfterStopAreServed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cert, key, roots, _ := newCert(t)
	certs := &settableCerts{}
	certs.set(cert, key)
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	s, addr := allowingServer(serveCtx, t, certs)
	s.CloseConnections() // as the lame duck does

	// A new connection for every request, over HTTP/1.1 as the API server
	// calls a webhook behind a Service.
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}, DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	url := "https://" + addr + "/validate/apps"
	if err := postReview(client, url); err != nil {
		t.Fatalf("before the stop: %v", err)
	}

	stop()
	const n = 50
	failed := 0
	var last error
	pace := time.NewTicker(10 * time.Millisecond) // as calls routed here come
	defer pace.Stop()
	for range n {
		if err := postReview(client, url); err != nil {
			failed++
			last = err
		}
		<-pace.C
	}
	if failed > 0 {
		t.Errorf("%d of %d requests on new connections after the stop failed (last: %v)", failed, n, last)
	}
	select {
	case <-s.Stopped():
	case <-time.After(MaxStopTime() + 10*time.Second):
		t.Fatal("the server did not stop once connections stopped coming")
	}
	if err := postReview(client, url); err == nil {
		t.Error("a request after the server stopped was served")
	}
}
