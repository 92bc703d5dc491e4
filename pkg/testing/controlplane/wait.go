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

package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// pollInterval is how often readiness conditions are checked.
const pollInterval = 100 * time.Millisecond

// errPortTaken marks a component that lost a freshly picked port to another
// process between picking and binding; the caller retries with new ports.
type errPortTaken struct{ err error }

func (e errPortTaken) Error() string { return e.err.Error() }
func (e errPortTaken) Unwrap() error { return e.err }

// waitReady polls ready until it returns nil, p exits, or timeout or ctx ends.
// ready's error says why the component is not ready yet.
func waitReady(ctx context.Context, timeout time.Duration, p *Process, ready func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, p.exitError()
		}
		last = ready(ctx)
		return last == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case p.Exited():
		exitErr := p.exitError()
		if strings.Contains(p.tail.lastLines(30), "address already in use") {
			return errPortTaken{exitErr}
		}
		return exitErr
	default:
		return fmt.Errorf("waiting for %s to be ready: %w (last check: %v); last output:\n%s", p.Name, err, last, p.tail.lastLines(30))
	}
}

// startAndWait starts the component build describes and waits until ready
// holds. build picks fresh ports on every call, so a port lost to a race is
// retried a few times.
func (cp *ControlPlane) startAndWait(ctx context.Context, timeout time.Duration, build func() (component, error), ready func(context.Context) error) (component, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		c, err := build()
		if err != nil {
			return component{}, err
		}
		begin := time.Now()
		p, err := startProcess(cp.spawner, c, cp.Dir, cp.logs)
		if err != nil {
			return component{}, err
		}
		cp.track(p)
		err = waitReady(ctx, timeout, p, ready)
		if err == nil {
			cp.logger.V(1).Info("Component ready", "component", c.name, "duration", time.Since(begin))
			return c, nil
		}
		if _, taken := err.(errPortTaken); !taken || attempt == attempts {
			return component{}, err
		}
		cp.logger.V(1).Info("Port taken, retrying with other ports", "component", c.name)
		p.stop()
		cp.untrack(p)
	}
}

// FreePorts returns n distinct loopback TCP ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		// Held open until all are picked, so the n ports differ.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("picking a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newProbeClient returns a client for the health endpoints of components,
// whose serving certificates are self-signed.
func newProbeClient() *http.Client {
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
}

// httpOK fails unless GET url answers 200 and, when want is not empty, a body
// containing want.
func httpOK(ctx context.Context, client *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
