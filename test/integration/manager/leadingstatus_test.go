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

package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A replica stops saying it leads before it releases the Lease, not after:
// once released, another replica takes it at once, and two replicas must
// never both say they lead one controller (the spread benchmark saw that
// for 0.1 s). The manager's own Lease release is held until its
// /debug/controllers has been read.
func TestLeadingClearedBeforeTheLeaseIsReleased(t *testing.T) {
	for _, perController := range []bool{false, true} {
		name := "single-lease"
		if perController {
			name = "lease-per-controller"
		}
		t.Run(name, func(t *testing.T) {
			ns := framework.CreateNamespace(t, cp.Client)
			var (
				mu        sync.Mutex
				m         *framework.Manager
				releases  int
				atRelease []bool
			)
			var stopping atomic.Bool
			cfg := rest.CopyConfig(cp.Config)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
					if stopping.Load() && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/leases/leading-test") &&
						!strings.Contains(req.URL.Path, "-member-") && isRelease(t, req) {
						mu.Lock()
						releases++
						l, err := leadingNow(m)
						if err != nil {
							t.Errorf("reading /debug/controllers at the release: %v", err)
						}
						atRelease = append(atRelease, l)
						mu.Unlock()
					}
					return rt.RoundTrip(req)
				})
			})
			m = framework.StartManager(t, cfg, func(o *options.Options) {
				o.Generic.Controllers = []string{ingress.ControllerName}
				o.LeaderElection.LeaderElect = true
				o.LeaderElection.ResourceNamespace = ns
				o.LeaderElection.ResourceName = "leading-test"
				o.HA.PerController = perController
			})
			framework.Eventually(t, 30*time.Second, "the manager to lead", func(context.Context) (bool, error) {
				return leading(t, m), nil
			})
			stopping.Store(true)
			if err := m.Stop(); err != nil {
				t.Fatalf("stopping the manager: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if releases == 0 {
				t.Fatal("the manager stopped without releasing its Lease")
			}
			for i, l := range atRelease {
				if l {
					t.Errorf("release %d of %d: /debug/controllers said the manager leads while it released the Lease", i+1, releases)
				}
			}
		})
	}
}

// leadingNow is leading, for a goroutine other than the test's.
func leadingNow(m *framework.Manager) (bool, error) {
	status, body, err := m.Get("/debug/controllers")
	if err != nil || status != http.StatusOK {
		return false, fmt.Errorf("GET /debug/controllers: %d %v", status, err)
	}
	var debug struct {
		Leading bool `json:"leading"`
	}
	err = json.Unmarshal([]byte(body), &debug)
	return debug.Leading, err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// isRelease reports whether req writes a Lease with no holder, as client-go's
// leader election does when it releases one; the body is left readable.
func isRelease(t *testing.T, req *http.Request) bool {
	if req.Body == nil {
		return false
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		t.Errorf("reading a Lease update: %v", err)
		return false
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		t.Errorf("decoding a Lease update: %v", err)
		return false
	}
	lease, ok := obj.(*coordinationv1.Lease)
	return ok && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "")
}
