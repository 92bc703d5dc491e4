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
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ndsl/controller-manager/pkg/certs"
)

// Rotation lifetimes short enough to rotate several times in one test: the
// serving certificate is renewed every 8 s, 4 s before it expires; the
// first CA's successor joins the bundle at 24 s and takes over at 32 s; the
// retired CA leaves at 48 s, when the next successor joins.
const (
	rotationCA     = 48 * time.Second
	rotationCert   = 12 * time.Second
	streamDuration = 60 * time.Second
	creators       = 3
)

// While two replicas rotate their serving certificate and their CA, a
// stream of creates (through the mutating and validating webhooks) and of
// reads in the other version (through the conversion webhook) sees no
// failure, and every fresh TLS connection to either replica, verified
// against the caBundle the API server holds at that moment, succeeds.
func TestRotationDuringCreateStreamFailsNoRequest(t *testing.T) {
	e := newEnv(t)
	r1 := e.startReplica(cp.Config, rotationCA, rotationCert)
	r2 := e.startReplica(cp.Config, rotationCA, rotationCert)
	e.lb.Set(r1.addr, r2.addr)
	e.waitReady(r1, r2)
	e.waitBundlesMatchSecret()
	e.waitAdmissionWorks()

	ctx, cancel := context.WithTimeout(context.Background(), streamDuration)
	defer cancel()
	var (
		creates, createFailures, reads, readFailures atomic.Int64
		handshakes, handshakeFailures                atomic.Int64
		mu                                           sync.Mutex
		failures                                     []string
		leaves                                       = map[string]map[string]bool{r1.addr: {}, r2.addr: {}}
		cas                                          = map[string]bool{}
		servingCerts                                 = map[string]bool{}
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	for w := range creators {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("stream-%d-%d", w, i)
				creates.Add(1)
				if _, err := e.widgets.Namespace(e.ns).Create(context.Background(), e.widget(name, int64(i)), metav1.CreateOptions{}); err != nil {
					createFailures.Add(1)
					fail("create %s: %v", name, err)
					continue
				}
				if i%5 == 0 {
					reads.Add(1)
					if _, err := e.widgetV2.Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
						readFailures.Add(1)
						fail("read %s as v2: %v", name, err)
					}
				}
			}
		})
	}
	// The probe: what a new API server connection would see, right now.
	wg.Go(func() {
		_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			bundles, err := e.bundles(context.Background())
			if err != nil {
				return false, nil
			}
			for _, addr := range []string{r1.addr, r2.addr} {
				handshakes.Add(1)
				leaf, err := servedLeaf(addr, bundles["validating"])
				if err != nil {
					handshakeFailures.Add(1)
					fail("handshake with %s against the current caBundle: %v", addr, err)
					continue
				}
				mu.Lock()
				leaves[addr][string(leaf.Raw)] = true
				mu.Unlock()
			}
			return false, nil
		})
	})
	// What the Secret went through.
	wg.Go(func() {
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			data, err := e.secret(context.Background())
			if err != nil {
				return false, nil
			}
			mu.Lock()
			cas[string(data[certs.CACertKey])] = true
			servingCerts[string(data[certs.TLSCertKey])] = true
			mu.Unlock()
			return false, nil
		})
	})
	wg.Wait()

	t.Logf("%d creates (%d failed), %d v2 reads (%d failed), %d fresh handshakes (%d failed); the Secret went through %d CAs and %d serving certificates; replicas served %d and %d certificates",
		creates.Load(), createFailures.Load(), reads.Load(), readFailures.Load(), handshakes.Load(), handshakeFailures.Load(),
		len(cas), len(servingCerts), len(leaves[r1.addr]), len(leaves[r2.addr]))
	for _, f := range failures {
		t.Error(f)
	}
	if creates.Load() < 50 {
		t.Errorf("only %d creates in %s: the stream did not run", creates.Load(), streamDuration)
	}
	if len(cas) < 2 || len(servingCerts) < 5 {
		t.Errorf("%d CAs and %d serving certificates: the rotation did not happen during the stream", len(cas), len(servingCerts))
	}
	for addr, seen := range leaves {
		if len(seen) < 3 {
			t.Errorf("replica %s served only %d certificates: it did not switch without a restart", addr, len(seen))
		}
	}
	// Every CA that signed a served certificate was in the bundle.
	data, err := e.secret(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := certutil.ParseCertsPEM(data[certs.CABundleKey]); err != nil {
		t.Errorf("final bundle: %v", err)
	}
}
