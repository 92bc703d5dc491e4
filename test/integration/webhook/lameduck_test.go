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
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// After SIGTERM a replica fails /readyz at once, yet answers every
// admission and conversion review on fresh connections for the whole
// --shutdown-delay-duration (the endpoints still route to it meanwhile),
// and exits after.
func TestLameDuckServesWebhooksThroughShutdownDelay(t *testing.T) {
	const delay = 3 * time.Second
	e := newEnv(t)
	r := e.startReplicaWith(cp.Config, longCA, longCert, func(o *options.Options) {
		o.Generic.ShutdownDelay = delay
	})
	e.waitReady(r)
	if err := e.review(r.addr); err != nil {
		t.Fatalf("reviews before SIGTERM: %v", err)
	}

	stopped := make(chan error, 1)
	sigterm := time.Now()
	go func() { stopped <- r.Stop() }()

	framework.Eventually(t, time.Second, "/readyz to fail at once", func(context.Context) (bool, error) {
		status, body, err := r.Get("/readyz?verbose")
		return status == http.StatusInternalServerError && strings.Contains(body, "[-]shutting-down failed"), err
	})
	// Poll every 100 ms until just before the delay ends.
	var reviews int
	var failures []string
	for time.Since(sigterm) < delay-300*time.Millisecond {
		reviews++
		if err := e.review(r.addr); err != nil {
			failures = append(failures, fmt.Sprintf("%s after SIGTERM: %v", time.Since(sigterm).Round(time.Millisecond), err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(failures) > 0 {
		t.Errorf("%d of %d review rounds failed during the shutdown delay:\n%s", len(failures), reviews, strings.Join(failures, "\n"))
	}
	t.Logf("%d review rounds (admission + conversion) answered during the %s delay", reviews, delay)

	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the replica did not exit within 30 s after its delay")
	}
	if took := time.Since(sigterm); took < delay {
		t.Errorf("the replica exited %s after SIGTERM, before its %s delay", took, delay)
	}
	if err := dialWebhook(r.addr); err == nil {
		t.Error("the webhook port still accepts connections after the replica exited")
	}
}

// With --shutdown-delay-duration=0 the replica closes as before: it exits
// promptly and its webhook port is closed.
func TestNoShutdownDelayClosesAtOnce(t *testing.T) {
	e := newEnv(t)
	r := e.startReplicaWith(cp.Config, longCA, longCert, func(o *options.Options) {
		o.Generic.ShutdownDelay = 0
	})
	e.waitReady(r)
	start := time.Now()
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the replica took %s to exit with no delay", took)
	}
	framework.Eventually(t, 5*time.Second, "the webhook port to close", func(context.Context) (bool, error) {
		return dialWebhook(r.addr) != nil, nil
	})
}

// lameDuckClient opens a fresh connection per request, as a caller that
// the Service has just routed here would.
var lameDuckClient = &http.Client{
	Timeout: 5 * time.Second,
	Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // serving is the point here, not trust
	},
}

func dialWebhook(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// review sends one AdmissionReview to the validating webhook and one
// ConversionReview to the conversion webhook, as the API server would, and
// checks both answers.
func (e *env) review(addr string) error {
	widget := e.widget("lame-duck", 1).Object
	admission := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid":       "lame-duck-admission",
			"kind":      map[string]any{"group": e.group, "version": "v1", "kind": "Widget"},
			"resource":  map[string]any{"group": e.group, "version": "v1", "resource": "widgets"},
			"name":      "lame-duck",
			"namespace": e.ns,
			"operation": "CREATE",
			"userInfo":  map[string]any{"username": "test"},
			"object":    widget,
		},
	}
	var ar struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
		} `json:"response"`
	}
	if err := postReview(addr, pathValidate, admission, &ar); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	if ar.Response.UID != "lame-duck-admission" || !ar.Response.Allowed {
		return fmt.Errorf("admission: unexpected response %+v", ar.Response)
	}

	conversion := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
		"request": map[string]any{
			"uid":               "lame-duck-conversion",
			"desiredAPIVersion": e.group + "/v2",
			"objects":           []any{widget},
		},
	}
	var cr struct {
		Response struct {
			UID    string `json:"uid"`
			Result struct {
				Status string `json:"status"`
			} `json:"result"`
			Objects []any `json:"convertedObjects"`
		} `json:"response"`
	}
	if err := postReview(addr, pathConvert, conversion, &cr); err != nil {
		return fmt.Errorf("conversion: %w", err)
	}
	if cr.Response.UID != "lame-duck-conversion" || cr.Response.Result.Status != "Success" || len(cr.Response.Objects) != 1 {
		return fmt.Errorf("conversion: unexpected response %+v", cr.Response)
	}
	return nil
}

func postReview(addr, path string, review, into any) error {
	body, err := json.Marshal(review)
	if err != nil {
		return err
	}
	res, err := lameDuckClient.Post("https://"+addr+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(into); err != nil {
		return errors.Join(errors.New("decoding the response"), err)
	}
	return nil
}
