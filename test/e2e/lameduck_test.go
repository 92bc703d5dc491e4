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

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndsl/controller-manager/pkg/webhook"
)

// The binary's lame duck, SIGTERM as the kubelet sends it: /readyz fails at
// once while the webhook port answers every request on a fresh connection
// for --shutdown-delay-duration, and the process exits 0 after it. A caller
// that keeps its connection alive (the API server does, and the Service's
// endpoints do not move a connection once made) is told to close it with
// every answer after SIGTERM, so that it reconnects, to another replica,
// and is not cut off mid-request when the server closes idle connections.
func TestSIGTERMLameDuckKeepsServingWebhooks(t *testing.T) {
	requireProcesses(t)
	if launcher.Webhooks == nil {
		t.Skip("the webhooks need the local control plane")
	}
	const delay = 3 * time.Second
	p := startManagers(t, 1, append(shortLease.args(), fmt.Sprintf("--shutdown-delay-duration=%s", delay))...)[0]
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // serving is the point here, not trust
	}}
	// An empty review: the webhook answers 400, which still proves it serves.
	answers := func() error {
		res, err := client.Post("https://"+p.WebhookAddr+webhook.PathConvertApps, "application/json", bytes.NewReader([]byte("{}")))
		if err != nil {
			return err
		}
		return res.Body.Close()
	}
	if err := answers(); err != nil {
		t.Fatalf("the webhook port before SIGTERM: %v", err)
	}
	keepAlive := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as above
	}}
	// closes says whether the answer on a kept-alive connection asks the
	// caller to close it.
	closes := func() (bool, error) {
		res, err := keepAlive.Post("https://"+p.WebhookAddr+webhook.PathConvertApps, "application/json", bytes.NewReader([]byte("{}")))
		if err != nil {
			return false, err
		}
		return res.Close, res.Body.Close()
	}
	if c, err := closes(); err != nil || c {
		t.Fatalf("a kept-alive connection before SIGTERM: closed %v, %v; want kept open", c, err)
	}

	sent := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "/readyz to fail at once", func(ctx context.Context) (bool, error) {
		code, _, err := p.Get(ctx, "/readyz")
		return code == http.StatusInternalServerError, err
	})
	var failures []string
	rounds := 0
	for time.Since(sent) < delay-300*time.Millisecond {
		rounds++
		if err := answers(); err != nil {
			failures = append(failures, fmt.Sprintf("%s after SIGTERM: %v", time.Since(sent).Round(time.Millisecond), err))
		}
		if c, err := closes(); err != nil || !c {
			failures = append(failures, fmt.Sprintf("%s after SIGTERM, on a kept-alive connection: closed %v, %v; want Connection: close",
				time.Since(sent).Round(time.Millisecond), c, err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d webhook requests failed during the shutdown delay:\n%s", len(failures), rounds, strings.Join(failures, "\n"))
	}
	if err := p.Wait(40 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != 0 {
		t.Errorf("exited with %s, want 0", p.ExitDescription())
	}
	if took := p.ExitedAt().Sub(sent); took < delay {
		t.Errorf("exited %s after SIGTERM, before its %s delay", took, delay)
	}
	t.Logf("%d webhook requests sent during the delay; exited %s after SIGTERM", rounds, p.ExitedAt().Sub(sent).Round(10*time.Millisecond))
}
