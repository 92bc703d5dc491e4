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
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// After CloseConnections every answer says Connection: close and the
// server closes the connection after it, so a kept-alive caller dials anew
// for its next request; before, the connection is reused.
func TestCloseConnectionsEndsKeptAliveConnections(t *testing.T) {
	s := NewServer()
	s.HandleAdmission("/validate/apps", "test-close", AdmissionFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return Allowed()
	}))
	srv := httptest.NewServer(s)
	defer srv.Close()
	client := srv.Client()

	// post answers whether the request went on a reused connection and
	// whether the answer asked to close it.
	post := func() (reused, closed bool) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, srv.URL+"/validate/apps", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// Read to the end, or the client closes the connection itself.
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return reused, res.Close
	}

	post()
	if reused, closed := post(); !reused || closed {
		t.Fatalf("before CloseConnections: reused %v, closed %v; want a kept-alive connection", reused, closed)
	}
	s.CloseConnections()
	if _, closed := post(); !closed {
		t.Error("after CloseConnections, the answer does not close its connection")
	}
	if reused, closed := post(); reused || !closed {
		t.Errorf("after CloseConnections: reused %v, closed %v; want a new connection, closed after the answer", reused, closed)
	}
}
